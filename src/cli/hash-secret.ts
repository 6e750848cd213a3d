/**
 * `hash-password` and `hash-token`: read a secret from standard input (one
 * trailing newline dropped) and print the line to paste into the config, so
 * secrets never appear in shell history or process listings.
 */
import { createHash } from 'node:crypto'
import { hashPassword } from '../auth/scrypt-hash.js'
import { headerSecretProblem } from '../config/credential-rules.js'

export async function readSecret(input: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of input) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '')
}

export async function runHashSecret(kind: 'hash-password' | 'hash-token', input: NodeJS.ReadableStream): Promise<number> {
  if ('isTTY' in input && input.isTTY) console.error(`Type the ${kind === 'hash-password' ? 'password' : 'token'}, then Enter and Ctrl-D:`)
  const secret = await readSecret(input)
  if (secret === '') {
    console.error('nothing read from standard input')
    return 1
  }
  if (kind === 'hash-password') {
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
