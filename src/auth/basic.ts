/**
 * Basic credential checks against `auth.users`. Every failed check costs one
 * scrypt derivation, whether or not the user exists (an unknown user is
 * checked against a decoy hash with the same parameters), so response time
 * does not reveal which usernames exist.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'
import type { User } from '../config/schema.js'
import { DEFAULT_SCRYPT, deriveScrypt, parseScryptHash, type ScryptHash } from './scrypt-hash.js'
import type { Principal } from './principal.js'
import { DerivationLimiter } from './derivation-limiter.js'

const MAX_CONCURRENT_DERIVATIONS = 2
/** ~0.6 s of waiting at the default scrypt settings (~40 ms a check, two at once); more are 429. */
export const MAX_WAITING_DERIVATIONS = 32

/** The key derivation; tests pass a counting one to see that every check pays one. */
export type Derive = typeof deriveScrypt

interface StoredUser {
  readonly user: User
  readonly hash: ScryptHash
}

export class BasicUserStore {
  readonly #users: ReadonlyMap<string, StoredUser>
  readonly #decoy: ScryptHash
  readonly #derive: Derive
  /** Two of libuv's four threads at most: the others stay free for hostname lookups. */
  readonly #limiter = new DerivationLimiter(MAX_CONCURRENT_DERIVATIONS, MAX_WAITING_DERIVATIONS)

  constructor(users: readonly User[], derive: Derive = deriveScrypt) {
    this.#derive = derive
    const stored = new Map<string, StoredUser>()
    for (const user of users) {
      const hash = parseScryptHash(user.password_scrypt)
      if (typeof hash === 'string') throw new Error(`auth.users "${user.username}": password_scrypt ${hash}`)
      stored.set(user.username.normalize('NFC'), { user, hash })
    }
    this.#users = stored
    // The decoy costs what a real user costs: same parameters as the first user.
    const model = stored.values().next().value?.hash ?? { ...DEFAULT_SCRYPT, salt: Buffer.alloc(0), hash: Buffer.alloc(DEFAULT_SCRYPT.keyLength) }
    this.#decoy = { N: model.N, r: model.r, p: model.p, salt: randomBytes(16), hash: randomBytes(model.hash.length) }
  }

  /** `clientGone`: aborted when the client leaves; a check still waiting for its turn is dropped then. */
  async verify(username: string, password: string, clientGone?: AbortSignal): Promise<Principal | null> {
    // RFC 7617 §2.1: with charset="UTF-8" (our challenge) the user-id is NFC-normalized, as the password is.
    const stored = this.#users.get(username.normalize('NFC'))
    const hash = stored?.hash ?? this.#decoy
    const derived = await this.#limiter.run(() => this.#derive(password, hash.salt, hash, hash.hash.length), clientGone)
    const matches = timingSafeEqual(derived, hash.hash)
    if (!matches || stored === undefined) return null
    return { kind: 'user', id: stored.user.username, scopes: stored.user.scopes }
  }
}

/**
 * The warning for users hashed with different scrypt settings (N, r, p, key
 * length), or null. The decoy costs what one setting costs, so a wrong
 * password for a user with another setting answers in another time, and
 * that tells the user exists (a security audit: 0.26 s against 0.03 s for
 * N=2^17 among N=2^14 users). Not refused: an operator may hold hashes
 * made elsewhere (config-warnings.ts).
 */
export function mixedSettingsWarning(hashes: readonly ScryptHash[]): string | null {
  const settings = new Set(hashes.map((hash) => `N=${hash.N} r=${hash.r} p=${hash.p} key=${hash.hash.length}`))
  if (settings.size <= 1) return null
  return `auth.users: the password hashes use different scrypt settings (${[...settings].join('; ')}): a wrong password costs each user's own, so response times tell which usernames exist; hash every password with the same settings (sluice hash-password)`
}
