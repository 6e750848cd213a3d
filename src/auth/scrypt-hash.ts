/**
 * The `password_scrypt` format of DESIGN.md: `scrypt$N$r$p$<salt b64>$<hash b64>`
 * (standard padded base64; the key length is the decoded hash's length).
 */
import { randomBytes, scrypt, type ScryptOptions } from 'node:crypto'

export interface ScryptHash {
  readonly N: number
  readonly r: number
  readonly p: number
  readonly salt: Buffer
  readonly hash: Buffer
}

/** OWASP's minimum for scrypt (2^17 is their first choice; 2^14 keeps a login under ~50 ms here). */
export const DEFAULT_SCRYPT = { N: 16384, r: 8, p: 1, keyLength: 64, saltLength: 16 } as const

/**
 * The most a configured hash may cost: 128·N·r bytes of memory and N·r·p
 * units of work per derivation, OWASP's first choice (N=2^17, r=8, p=1:
 * 128 MiB, ~8× this module's default). Every Basic attempt pays it, an
 * unknown user's included (the decoy uses the first user's parameters),
 * so a larger one would let unauthenticated clients exhaust memory.
 */
export const MAX_SCRYPT_WORK = 2 ** 20

export function parseScryptHash(text: string): ScryptHash | string {
  const parts = text.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return 'must be scrypt$N$r$p$salt$hash'
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])]
  if (!Number.isInteger(N) || N < 2 || (N & (N - 1)) !== 0) return 'N must be a power of two greater than 1'
  if (!Number.isInteger(r) || r < 1 || !Number.isInteger(p) || p < 1) return 'r and p must be positive integers'
  if (N * r * p > MAX_SCRYPT_WORK) {
    return `N·r·p must be at most ${MAX_SCRYPT_WORK} (e.g. N=131072, r=8, p=1), not ${N * r * p}: every Basic attempt, an unknown user's too, pays it (re-hash with hash-password)`
  }
  // OpenSSL's own rule; Node refuses to derive past it, and every Basic check (the unknown user's decoy too) was a 500.
  if (16 * r < 53 && N >= 2 ** (16 * r)) return `N must be below 2^(16·r) for OpenSSL's scrypt (with r=${r}, at most ${2 ** (16 * r - 1)}): re-hash with hash-password`
  const salt = Buffer.from(parts[4]!, 'base64')
  const hash = Buffer.from(parts[5]!, 'base64')
  if (salt.length === 0 || hash.length < 16) return 'salt must be non-empty and the hash at least 16 bytes'
  return { N, r, p, salt, hash }
}

export function formatScryptHash(hash: ScryptHash): string {
  return `scrypt$${hash.N}$${hash.r}$${hash.p}$${hash.salt.toString('base64')}$${hash.hash.toString('base64')}`
}

export function deriveScrypt(password: string, salt: Buffer, params: { N: number; r: number; p: number }, keyLength: number): Promise<Buffer> {
  // Node's default maxmem (32 MiB) is below what large N·r needs; allow twice the working set.
  const options: ScryptOptions = { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r * params.p + 1024 * 1024 }
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, keyLength, options, (error, key) => (error ? reject(error) : resolve(key)))
  })
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(DEFAULT_SCRYPT.saltLength)
  const hash = await deriveScrypt(password, salt, DEFAULT_SCRYPT, DEFAULT_SCRYPT.keyLength)
  return formatScryptHash({ N: DEFAULT_SCRYPT.N, r: DEFAULT_SCRYPT.r, p: DEFAULT_SCRYPT.p, salt, hash })
}
