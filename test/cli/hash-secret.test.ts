/**
 * `node dist/main.js hash-token` and `hash-password`, run as a user would:
 * the secret on standard input, the config line on standard output.
 * Needs a build (`npm test` builds first; locally run `npm run build`).
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { BasicUserStore } from '../../src/auth/basic.js'
import { deriveScrypt, parseScryptHash, type ScryptHash } from '../../src/auth/scrypt-hash.js'
import { configFrom } from '../support/gateway.js'

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url))
const ROOT = fileURLToPath(new URL('../..', import.meta.url))

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

function run(command: string | readonly string[], stdin: string | Buffer): Promise<Run> {
  return new Promise((resolve, reject) => {
    // No SLUICE_CONFIG from the environment: these commands need no config.
    const env = { ...process.env }
    delete env.SLUICE_CONFIG
    const child = spawn(process.execPath, [MAIN, ...(typeof command === 'string' ? [command] : command)], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] })
    const out: Buffer[] = []
    const err: Buffer[] = []
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }))
    child.stdin.end(stdin)
  })
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex')
}

/** The one stdout line of hash-password, read as the YAML it is meant to be pasted as. */
function storedHash(result: Run): { text: string; hash: ScryptHash } {
  expect(result.code).toBe(0)
  const lines = result.stdout.split('\n').filter((line) => line !== '')
  expect(lines).toHaveLength(1)
  expect(lines[0]).toMatch(/^password_scrypt: "scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/]+={0,2}\$[A-Za-z0-9+/]+={0,2}"$/)
  const text = (parse(lines[0]!) as { password_scrypt: string }).password_scrypt
  const hash = parseScryptHash(text)
  if (typeof hash === 'string') throw new Error(`unparseable hash: ${hash}`)
  return { text, hash }
}

async function verifies(hash: ScryptHash, password: string): Promise<boolean> {
  const derived = await deriveScrypt(password, hash.salt, hash, hash.hash.length)
  return derived.equals(hash.hash)
}

beforeAll(() => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" first`)
})

describe('hash-token', () => {
  it('prints the sha256 hex of the token, one trailing newline dropped', async () => {
    const token = 'sk-team-a-0123456789abcdef'
    const result = await run('hash-token', `${token}\n`)
    expect(result.code).toBe(0)
    expect(result.stdout).toBe(`token_sha256: ${sha256(token)}\n`)
    expect(result.stdout).not.toContain(token)
  })

  it('treats input without a newline and with CRLF the same', async () => {
    const token = 'tok:with:colons'
    const [bare, crlf] = await Promise.all([run('hash-token', token), run('hash-token', `${token}\r\n`)])
    expect(bare.stdout).toBe(`token_sha256: ${sha256(token)}\n`)
    expect(crlf.stdout).toBe(bare.stdout)
  })

  it('drops only one trailing newline: a token still ending in one is refused, as no header can carry it', async () => {
    const result = await run('hash-token', 'abc\n\n')
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(/line break/)
  })

  // Regression: a digest was printed that no client could ever match (Node
  // reads header bytes as latin1, so the gateway hashed other characters).
  it('refuses a token beyond printable ASCII, printing no digest', async () => {
    const result = await run('hash-token', 'tök-123\n')
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(/beyond printable ASCII/)
  })

  it('the printed line is accepted as a key in a config', async () => {
    const result = await run('hash-token', 'sk-config-check\n')
    const { token_sha256 } = parse(result.stdout.trim()) as { token_sha256: string }
    const config = configFrom({ auth: { keys: [{ id: 'k', token_sha256, scopes: ['chat'] }] }, models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }] })
    expect(config.auth.keys[0]?.token_sha256).toBe(sha256('sk-config-check'))
  })
})

describe('hash-password', () => {
  it('prints a scrypt line that verifies the password (with ":"), its trailing newline stripped', async () => {
    const password = 'pa:ss:word: with spaces'
    const result = await run('hash-password', `${password}\n`)
    const { hash } = storedHash(result)
    expect(hash.hash.length).toBe(64)
    expect(hash.salt.length).toBeGreaterThanOrEqual(16)
    expect(await verifies(hash, password)).toBe(true)
    expect(await verifies(hash, `${password}\n`)).toBe(false)
    expect(await verifies(hash, 'pa')).toBe(false)
    expect(result.stdout).not.toContain(password)
  })

  it('salts: the same password twice gives different lines, both valid', async () => {
    const [first, second] = await Promise.all([run('hash-password', 'same-pw\n'), run('hash-password', 'same-pw\n')])
    const a = storedHash(first)
    const b = storedHash(second)
    expect(a.text).not.toBe(b.text)
    expect(await verifies(a.hash, 'same-pw')).toBe(true)
    expect(await verifies(b.hash, 'same-pw')).toBe(true)
  })

  it('the printed line works as a user in a config and in the Basic user store', async () => {
    const result = await run('hash-password', 'ütf-8:pw\n')
    const { text } = storedHash(result)
    const config = configFrom({ auth: { users: [{ username: 'alice', password_scrypt: text, scopes: ['objects'] }] }, models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }] })
    const users = new BasicUserStore(config.auth.users)
    await expect(users.verify('alice', 'ütf-8:pw')).resolves.toMatchObject({ id: 'alice' })
    await expect(users.verify('alice', 'utf-8:pw')).resolves.toBeNull()
  })

  // Regression (auth review, session 27): the gateway refuses Basic credentials that are not UTF-8 or hold a
  // control character, but hash-password hashed them: a tab made a hash nothing matched, and a Latin-1 byte
  // became U+FFFD, a hash of another password than the one typed.
  it.each([
    ['a tab', Buffer.from('pw\tabc\n'), /control character/],
    ['a Latin-1 byte', Buffer.from([0x70, 0x77, 0x2d, 0xe9, 0x0a]), /not UTF-8/],
    ['a second line', Buffer.from('pw\nmore\n'), /control character/],
  ])('refuses a password with %s, printing no hash', async (_name, input, message) => {
    const result = await run('hash-password', input)
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(message)
  })
})

describe('empty input', () => {
  it.each([
    ['hash-token', ''],
    ['hash-password', ''],
    ['hash-token', '\n'],
    ['hash-password', '\r\n'],
  ])('%s with %j on stdin exits 1 and prints nothing on stdout', async (command, stdin) => {
    const result = await run(command, stdin)
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(/nothing read/)
  })
})

describe('the command line', () => {
  it('--help prints the usage on stdout and exits 0', async () => {
    for (const flag of ['--help', '-h']) {
      const result = await run([flag], '')
      expect(result.code).toBe(0)
      expect(result.stdout).toMatch(/^usage: sluice /)
    }
  })

  // Regression: usage errors printed a JavaScript stack trace.
  it.each([[['--bogus']], [['--config']], [['serve', 'extra']]])('%j: one line saying what is wrong, the usage, exit 2, no stack', async (argv) => {
    const result = await run(argv, '')
    expect(result.code).toBe(2)
    expect(result.stderr.split('\n')[0]).toMatch(/^sluice: (unknown argument|--config needs)/)
    expect(result.stderr).toContain('usage: sluice')
    expect(result.stderr).not.toMatch(/\n\s+at /)
  })
})
