/**
 * What the Lua scripts publish on a replica's channel (redis-keys.ts
 * `replicaChannel`) about one of its waiters. Read defensively: a message
 * this version does not understand is ignored.
 */

export interface ReplicaMessage {
  readonly kind: 'grant' | 'evict'
  readonly model: string
  readonly id: string
  readonly backend?: string
  /** A grant's lease expiry, Redis time (ms); absent from an older build's messages. */
  readonly expires?: number
}

/** The message, or null when it is not one this version understands. */
export function parseReplicaMessage(raw: string): ReplicaMessage | null {
  try {
    const data = JSON.parse(raw) as Partial<ReplicaMessage>
    if ((data.kind !== 'grant' && data.kind !== 'evict') || typeof data.model !== 'string' || typeof data.id !== 'string') return null
    return {
      kind: data.kind,
      model: data.model,
      id: data.id,
      backend: typeof data.backend === 'string' ? data.backend : undefined,
      expires: typeof data.expires === 'number' && Number.isFinite(data.expires) ? data.expires : undefined,
    }
  } catch {
    return null
  }
}
