/**
 * A new value for a member the client sent, written from that member's own
 * bytes by the body splice (proxy/chat-upstream-body.ts), so what the
 * client wrote inside it survives. `rewrite` answers null for bytes it
 * cannot read; serialized whole (the splice's fallback), it is `fallback`.
 */
export class MemberRewrite {
  constructor(
    readonly rewrite: (clientBytes: Buffer) => string | null,
    readonly fallback: unknown,
  ) {}

  toJSON(): unknown {
    return this.fallback
  }
}
