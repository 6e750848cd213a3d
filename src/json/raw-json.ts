/**
 * JSON text written as it is where a value goes (the body splice,
 * proxy/chat-upstream-body.ts), so the client's own spelling of what it
 * holds survives; serialized whole (the splice's fallback), it is the
 * value the text parses to.
 */
export class RawJson {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    return JSON.parse(this.text) as unknown
  }
}
