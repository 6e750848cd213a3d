/**
 * `hash-password` and `hash-token`: read a secret from standard input (one
 * trailing newline dropped) and print the line to paste into the config, so
 * secrets never appear in shell history or process listings.
 */
import { isUtf8 } from 'node:buffer'
import { createHash } from 'node:crypto'
import { hashPassword } from '../auth/scrypt-hash.js'
import { basicCredentialProblem, headerSecretProblem } from '../config/credential-rules.js'

/** Standard input as text, one trailing newline dropped; null when its bytes are not UTF-8. */
async function readSecret(input: NodeJS.ReadableStream): Promise<string | null> {
  const chunks: Buffer[] = []
  for await (const chunk of input) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
  const bytes = Buffer.concat(chunks)
  // Decoded leniently, each invalid byte became U+FFFD: a hash of another password than the one typed.
  if (!isUtf8(bytes)) return null
  return bytes.toString('utf8').replace(/\r?\n$/, '')
}

/**
 * Why no client could ever log in with `password`; null when one can. The
 * gateway refuses Basic credentials that are not UTF-8 or hold a control
 * character (auth/authenticate.ts), so such a hash matched nothing, and
 * `hash-password` printed it without a word (an auth review).
 */
function passwordProblem(password: string): string | null {
  const problem = basicCredentialProblem(password, 'password')
  return problem === null ? null : `the password ${problem}: no client could log in with it`
}

export async function runHashSecret(kind: 'hash-password' | 'hash-token', input: NodeJS.ReadableStream): Promise<number> {
  if ('isTTY' in input && input.isTTY) console.error(`Type the ${kind === 'hash-password' ? 'password' : 'token'}, then Enter and Ctrl-D:`)
  const secret = await readSecret(input)
  if (secret === null) {
    console.error('standard input is not UTF-8 text: a client sends its credentials in UTF-8, so no client could send this secret')
    return 1
  }
  if (secret === '') {
    console.error('nothing read from standard input')
    return 1
  }
  if (kind === 'hash-password') {
    const problem = passwordProblem(secret)
    if (problem !== null) {
      console.error(problem)
      return 1
    }
    console.log(`password_scrypt: "${await hashPassword(secret)}"`)
    return 0
  }
  // A client sends the token in a header: one that cannot travel there (a
  // character beyond ASCII reaches the gateway re-decoded) would never match.
  const problem = headerSecretProblem(secret)
  if (problem !== null) {
    console.error(`the token ${problem}: no client could send it in an Authorization header`)
    return 1
  }
  console.log(`token_sha256: ${createHash('sha256').update(secret, 'utf8').digest('hex')}`)
  return 0
}
