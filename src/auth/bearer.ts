/**
 * Bearer key lookup. Configured keys are stored as sha256 digests; the
 * presented token is hashed and compared against every key in constant time,
 * with no early exit, so timing tells nothing about which bytes matched or
 * which key came close.
 */
import { hash, timingSafeEqual } from 'node:crypto'
import type { ApiKey } from '../config/schema.js'

interface StoredKey {
  readonly digest: Buffer
  readonly key: ApiKey
}

export class BearerKeyring {
  readonly #keys: readonly StoredKey[]

  constructor(keys: readonly ApiKey[]) {
    this.#keys = keys.map((key) => ({ digest: Buffer.from(key.token_sha256, 'hex'), key }))
  }

  /** The key whose token this is, or null. */
  find(token: string): ApiKey | null {
    const digest = sha256(token)
    let found: ApiKey | null = null
    for (const stored of this.#keys) {
      // Every key is compared; `found` is set without branching out of the loop.
      if (timingSafeEqual(stored.digest, digest) && found === null) found = stored.key
    }
    return found
  }
}

/** One-shot `crypto.hash` (Node ≥ 20.12): no Hash object per request, as `createHash` needs. */
export function sha256(text: string): Buffer {
  return hash('sha256', text, 'buffer')
}
