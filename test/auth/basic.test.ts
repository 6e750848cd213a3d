/**
 * Basic authentication on `POST /obj/read`, the scheme split between the
 * Basic and Bearer routes, and `BasicUserStore.verify` as a unit. A real
 * gateway on port 0 in front of the stand-ins, which record what reached them.
 */
import { randomBytes } from 'node:crypto'
import { Client } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { decodeBasic } from '../../src/auth/authenticate.js'
import { BasicUserStore, MAX_WAITING_DERIVATIONS, mixedSettingsWarning, type Derive } from '../../src/auth/basic.js'
import { deriveScrypt, formatScryptHash, hashPassword, parseScryptHash, type ScryptHash } from '../../src/auth/scrypt-hash.js'
import { startObjectStoreStandIn, type ObjectStoreStandIn } from '../../src/dev/object-store-stand-in.js'
import { startTrainingStandIn, type TrainingStandIn } from '../../src/dev/training-stand-in.js'
import { makeKey, startTestGateway, type TestGateway } from '../support/gateway.js'
import { rawExchange } from '../support/raw-http.js'
import { scrapeMetric } from '../support/metrics.js'

const BASIC_CHALLENGE = 'Basic realm="sluice", charset="UTF-8"'
const MODEL = '0b9c54f4-3a3e-4d7e-9a57-2f4a1f0e6c11'
const STORE_AUTHORIZATION = `Basic ${Buffer.from('svc:store-pw').toString('base64')}`

const ALICE = { username: 'alice', password: 'Alice-pw-0001' }
const COLON = { username: 'colin', password: 'a:b::c:' }
const UNICODE = { username: 'zoë', password: 'pässwörd-ü' }
const chatKey = makeKey('chat-only', ['chat'])
const platformKey = makeKey('platform', ['training', 'checkpoints'])

function basic(userPass: string): string {
  return `Basic ${Buffer.from(userPass, 'utf8').toString('base64')}`
}

const READ_BODY = JSON.stringify({ project_id: 'demo/project', object_id: 'config', digest: 'latest' })
const JOB_BODY = JSON.stringify({ model_id: MODEL, trajectory_groups: [] })

let store: ObjectStoreStandIn
let training: TrainingStandIn
let gw: TestGateway

beforeAll(async () => {
  store = await startObjectStoreStandIn({ expectAuthorization: STORE_AUTHORIZATION })
  training = await startTrainingStandIn({ checkpoints: { [MODEL]: 2 } })
  gw = await startTestGateway({
    auth: {
      keys: [chatKey.entry, platformKey.entry],
      users: await Promise.all(
        [ALICE, COLON, UNICODE].map(async (user) => ({ username: user.username, password_scrypt: await hashPassword(user.password), scopes: ['objects'] })),
      ),
    },
    models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
    upstreams: {
      training: { url: training.url, auth: { bearer: 'training-upstream-tok' } },
      checkpoints: { url: training.url, auth: { bearer: 'training-upstream-tok' } },
      objects: { url: store.url, auth: { basic: { username: 'svc', password: 'store-pw' } } },
    },
  })
})

afterAll(async () => {
  await gw?.shutdown()
  await Promise.all([store?.close(), training?.close()])
})

interface Answer {
  status: number
  challenge: string | null
  text: string
}

async function send(method: 'GET' | 'POST', path: string, authorization: string | undefined, body?: string): Promise<Answer> {
  const headers: Record<string, string> = {}
  if (body !== undefined) headers['content-type'] = 'application/json'
  if (authorization !== undefined) headers.authorization = authorization
  const response = await fetch(`${gw.url}${path}`, { method, headers, body })
  return { status: response.status, challenge: response.headers.get('www-authenticate'), text: await response.text() }
}

const readObject = (authorization: string | undefined) => send('POST', '/obj/read', authorization, READ_BODY)

function errorOf(answer: Answer): Record<string, unknown> {
  const body = JSON.parse(answer.text) as { error: Record<string, unknown> }
  expect(Object.keys(body)).toEqual(['error'])
  return body.error
}

describe('Basic credentials on /obj/read', () => {
  it('a valid user is forwarded, and the store sees the gateway credentials', async () => {
    const before = store.received.length
    const answer = await readObject(basic(`${ALICE.username}:${ALICE.password}`))
    expect(answer.status).toBe(200)
    expect((JSON.parse(answer.text) as { obj: { object_id: string } }).obj.object_id).toBe('config')
    expect(store.received.length).toBe(before + 1)
    expect(store.received.at(-1)?.headers.authorization).toBe(STORE_AUTHORIZATION)
  })

  it('the right password with NULs after it is 401, and nothing is forwarded (scrypt alone would take it)', async () => {
    const before = store.received.length
    for (const suffix of ['\u0000', '\u0000\u0000\u0000']) expect((await readObject(basic(`${ALICE.username}:${ALICE.password}${suffix}`))).status).toBe(401)
    expect(store.received.length).toBe(before)
  })

  it('a password containing ":" works (only the first colon separates)', async () => {
    const answer = await readObject(basic(`${COLON.username}:${COLON.password}`))
    expect(answer.status).toBe(200)
  })

  it('a UTF-8 user name and password work (charset="UTF-8" is advertised)', async () => {
    const answer = await readObject(basic(`${UNICODE.username}:${UNICODE.password}`))
    expect(answer.status).toBe(200)
  })

  it('the scheme name is case-insensitive', async () => {
    const answer = await readObject(`basic ${Buffer.from(`${ALICE.username}:${ALICE.password}`).toString('base64')}`)
    expect(answer.status).toBe(200)
  })

  const refused: [string, string | undefined, string][] = [
    ['no Authorization header', undefined, 'missing_credentials'],
    ['an unknown user', basic(`mallory:${ALICE.password}`), 'invalid_credentials'],
    ['a wrong password', basic(`${ALICE.username}:Alice-pw-0002`), 'invalid_credentials'],
    ['the password of another user', basic(`${ALICE.username}:${COLON.password}`), 'invalid_credentials'],
    ['a password with the colon part cut off', basic(`${COLON.username}:a`), 'invalid_credentials'],
    ['the right password with a trailing newline', basic(`${ALICE.username}:${ALICE.password}\n`), 'invalid_credentials'],
    ['a user-name case variant', basic(`ALICE:${ALICE.password}`), 'invalid_credentials'],
    ['malformed base64', 'Basic !!not*base64!!', 'invalid_credentials'],
    ['"Basic " with nothing after it', 'Basic ', 'invalid_credentials'],
    ['"Basic" alone', 'Basic', 'invalid_credentials'],
    ['an empty password part', basic(`${ALICE.username}:`), 'invalid_credentials'],
    ['no colon at all', basic(ALICE.username), 'invalid_credentials'],
    ['an empty user name', basic(`:${ALICE.password}`), 'invalid_credentials'],
    ['Bearer with a valid key', `Bearer ${platformKey.token}`, 'wrong_auth_scheme'],
    ['Bearer with the Basic value', `Bearer ${Buffer.from(`${ALICE.username}:${ALICE.password}`).toString('base64')}`, 'wrong_auth_scheme'],
  ]

  it.each(refused)('%s → 401 with the Basic challenge, nothing forwarded', async (_name, authorization, code) => {
    const before = store.received.length
    const answer = await readObject(authorization)
    expect(answer.status).toBe(401)
    expect(answer.challenge).toBe(BASIC_CHALLENGE)
    expect(errorOf(answer)).toEqual({ message: expect.any(String), type: 'authentication_error', param: null, code })
    expect(store.received.length).toBe(before)
  })

  it('checks credentials before the body: an invalid body with a wrong password is 401, not 400', async () => {
    const before = store.received.length
    const answer = await send('POST', '/obj/read', basic(`${ALICE.username}:nope`), '{"project_id": 3')
    expect(answer.status).toBe(401)
    expect(answer.challenge).toBe(BASIC_CHALLENGE)
    expect(store.received.length).toBe(before)
  })
})

// Regression: the line of checks waiting for a derivation had no bound, so a flood of held
// connections with wrong passwords made every new check wait behind all of them.
describe('a flood of failed Basic checks', () => {
  const FLOOD = 100

  it('past two running and the line, checks are 429 at once; a connection that proved its credentials is still served', async () => {
    const proven = new Client(gw.url)
    const readOnProven = async () => {
      const answer = await proven.request({ method: 'POST', path: '/obj/read', headers: { authorization: basic(`${ALICE.username}:${ALICE.password}`), 'content-type': 'application/json' }, body: READ_BODY })
      await answer.body.dump()
      return answer.statusCode
    }
    try {
      expect(await readOnProven()).toBe(200)
      let firstBusy!: () => void
      const busy = new Promise<void>((resolve) => (firstBusy = resolve))
      const flood = Array.from({ length: FLOOD }, async (_, i) => {
        const response = await fetch(`${gw.url}/obj/read`, { method: 'POST', headers: { authorization: basic(`${ALICE.username}:wrong-${i}`), 'content-type': 'application/json' }, body: READ_BODY })
        const answer = { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as { error: Record<string, unknown> } }
        if (answer.status === 429) firstBusy()
        return answer
      })
      const settled = Promise.all(flood)
      await Promise.race([busy, settled])
      // The line is full now; this connection's proof needs no derivation.
      expect(await readOnProven()).toBe(200)

      const answers = await settled
      const refused = answers.filter((a) => a.status === 429)
      expect(answers.filter((a) => a.status !== 401 && a.status !== 429)).toEqual([])
      // Two running and the whole line were checked in full; the rest did not wait.
      expect(answers.filter((a) => a.status === 401).length).toBeGreaterThanOrEqual(2 + MAX_WAITING_DERIVATIONS)
      expect(refused.length).toBeGreaterThan(0)
      for (const answer of refused) {
        expect(answer.retryAfter).toBe('1')
        expect(answer.body.error).toMatchObject({ type: 'rate_limit_error', code: 'credential_checks_busy', param: null })
      }
      // Counted with the other requests turned away under load (a metrics review: the alert on them missed this flood).
      expect(await scrapeMetric(gw.url, 'sluice_rejections_total', { reason: 'credential_checks_busy' })).toBe(refused.length)
    } finally {
      await proven.close()
    }
  })
})

describe('Basic credentials on the Bearer routes', () => {
  const routes: ['GET' | 'POST', string, string | undefined][] = [
    ['POST', '/v1/preview/training-jobs', JOB_BODY],
    ['GET', `/v1/preview/models/${MODEL}/checkpoints`, undefined],
  ]

  it.each(routes)('%s %s with valid Basic credentials → 401 with a Bearer challenge', async (method, path, body) => {
    const before = training.received.length
    const answer = await send(method, path, basic(`${ALICE.username}:${ALICE.password}`), body)
    expect(answer.status).toBe(401)
    expect(answer.challenge).toMatch(/^Bearer realm="sluice"/)
    expect(errorOf(answer)).toEqual({ message: expect.any(String), type: 'authentication_error', param: null, code: 'wrong_auth_scheme' })
    expect(training.received.length).toBe(before)
  })

  it.each(routes)('%s %s with a key scoped [chat] → 403 permission_error', async (method, path, body) => {
    const before = training.received.length
    const answer = await send(method, path, `Bearer ${chatKey.token}`, body)
    expect(answer.status).toBe(403)
    expect(errorOf(answer)).toEqual({ message: expect.any(String), type: 'permission_error', param: null, code: 'insufficient_scope' })
    expect(training.received.length).toBe(before)
  })

  it('scope is checked before the body: a [chat] key with an invalid training body is 403, not 400', async () => {
    const answer = await send('POST', '/v1/preview/training-jobs', `Bearer ${chatKey.token}`, '{"model_id": "not-a-uuid"}')
    expect(answer.status).toBe(403)
  })

  it.each(routes)('%s %s with the right key is forwarded (control)', async (method, path, body) => {
    const answer = await send(method, path, `Bearer ${platformKey.token}`, body)
    expect(answer.status).toBe(200)
  })
})

describe('secrets stay out of the log', () => {
  it('no password, Basic value or token appears in any log line', async () => {
    // Make sure both accepted and refused requests were logged.
    await readObject(basic(`${ALICE.username}:${ALICE.password}`))
    await readObject(basic(`${ALICE.username}:wrong-secret-pw`))
    const log = gw.logText()
    expect(gw.logLines().filter((line) => line.msg === 'request completed').length).toBeGreaterThan(10)
    const secrets = [
      ALICE.password,
      COLON.password,
      UNICODE.password,
      'wrong-secret-pw',
      'Alice-pw-0002',
      Buffer.from(`${ALICE.username}:${ALICE.password}`).toString('base64'),
      Buffer.from(`${COLON.username}:${COLON.password}`).toString('base64'),
      chatKey.token,
      platformKey.token,
      'store-pw',
      'training-upstream-tok',
    ]
    for (const secret of secrets) expect(log).not.toContain(secret)
    // The principal is logged by id only.
    expect(gw.logLines().some((line) => line.principal === ALICE.username && line.status === 200)).toBe(true)
  })
})

// Regression (auth review): String.trim() removed a no-break space (a 0xA0 byte, as Node reads it) around
// the value, so the header was approved; a forward_client upstream got it byte for byte, another token.
describe('a no-break space (0xA0) around the Authorization value', () => {
  const value = basic(`${ALICE.username}:${ALICE.password}`)
  it.each([
    ['after the credentials', `${value}\u00a0`],
    ['before the scheme', `\u00a0${value}`],
    ['between the scheme and the credentials', value.replace(' ', ' \u00a0')],
  ])('%s: 401, nothing forwarded', async (_name, authorization) => {
    const before = store.received.length
    const { responses } = await rawExchange(gw.url, rawRead(authorization))
    expect(responses.map((r) => r.status)).toEqual([401])
    expect(store.received.length).toBe(before)
  })

  it('spaces and tabs around it are HTTP whitespace: 200', async () => {
    const { responses } = await rawExchange(gw.url, rawRead(` \t${value} \t`))
    expect(responses.map((r) => r.status)).toEqual([200])
  })

  /** The request's bytes as latin1: each character one byte, 0xA0 included (an HTTP client library would encode it otherwise). */
  function rawRead(authorization: string): Buffer {
    const head = `POST /obj/read HTTP/1.1\r\nhost: x\r\nauthorization: ${authorization}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${READ_BODY.length}\r\n\r\n`
    return Buffer.from(head + READ_BODY, 'latin1')
  }
})

describe('BasicUserStore.verify', () => {
  let users: BasicUserStore
  beforeAll(async () => {
    users = new BasicUserStore([{ username: 'alice', password_scrypt: await hashPassword('right:pw'), scopes: ['objects'] }])
  })

  it('resolves the principal for the right password', async () => {
    await expect(users.verify('alice', 'right:pw')).resolves.toEqual({ kind: 'user', id: 'alice', scopes: ['objects'] })
  })

  it('resolves null, alike, for an unknown user and for a wrong password', async () => {
    const [unknown, wrong, unknownWithRightPassword] = await Promise.all([users.verify('bob', 'right:pw'), users.verify('alice', 'wrong'), users.verify('Alice', 'right:pw')])
    expect(unknown).toBeNull()
    expect(wrong).toBeNull()
    expect(unknownWithRightPassword).toBeNull()
  })

  it("pays one derivation with the user's work factor and key length for every check, an unknown user's included", async () => {
    const calls: { N: number; r: number; p: number; keyLength: number }[] = []
    const counting: Derive = (password, salt, params, keyLength) => {
      calls.push({ N: params.N, r: params.r, p: params.p, keyLength })
      return deriveScrypt(password, salt, params, keyLength)
    }
    // Not the defaults, so a decoy built from them would show.
    const aliceCost = { N: 1024, r: 4, p: 2, keyLength: 32 }
    const salt = randomBytes(16)
    const stored = formatScryptHash({ ...aliceCost, salt, hash: await deriveScrypt('right:pw', salt, aliceCost, aliceCost.keyLength) })
    const counted = new BasicUserStore([{ username: 'alice', password_scrypt: stored, scopes: ['objects'] }], counting)
    await expect(counted.verify('alice', 'right:pw')).resolves.toMatchObject({ id: 'alice' })

    for (const [username, password] of [['alice', 'right:pw'], ['alice', 'wrong'], ['bob', 'right:pw'], ['', '']] as const) {
      calls.length = 0
      await counted.verify(username, password)
      expect(calls, `${username || '(empty)'}: one derivation at alice's cost`).toEqual([aliceCost])
    }
  })

  // Regression (auth review): the password was NFC-normalized and the user-id was not; a client sending
  // "jürgen" decomposed (macOS input) was refused. RFC 7617 §2.1 normalizes both under charset="UTF-8".
  it('matches a user-id in either Unicode normal form, naming the user as configured', async () => {
    const composed = 'j\u00fcrgen'
    const decomposed = 'ju\u0308rgen'
    const byComposed = new BasicUserStore([{ username: composed, password_scrypt: await hashPassword('pw'), scopes: ['objects'] }])
    await expect(byComposed.verify(decomposed, 'pw')).resolves.toEqual({ kind: 'user', id: composed, scopes: ['objects'] })
    const byDecomposed = new BasicUserStore([{ username: decomposed, password_scrypt: await hashPassword('pw'), scopes: ['objects'] }])
    await expect(byDecomposed.verify(composed, 'pw')).resolves.toEqual({ kind: 'user', id: decomposed, scopes: ['objects'] })
  })

  it('resolves null for everything when no user is configured', async () => {
    const empty = new BasicUserStore([])
    await expect(empty.verify('alice', 'right:pw')).resolves.toBeNull()
    await expect(empty.verify('', '')).resolves.toBeNull()
  })

  it('refuses a malformed stored hash at construction', () => {
    expect(() => new BasicUserStore([{ username: 'eve', password_scrypt: 'scrypt$3$8$1$c2FsdA==$aGFzaA==', scopes: ['objects'] }])).toThrow(/eve/)
  })
})

// Regression (security audit): with one user hashed at N=2^17 among N=2^14 users, a wrong password
// took 0.26 s for that user and 0.03 s for a name that does not exist. Not refused; said.
describe('users hashed with different scrypt settings', () => {
  const hashAt = async (N: number, password: string) => {
    const cost = { N, r: 8, p: 1, keyLength: 64 }
    const salt = randomBytes(16)
    return formatScryptHash({ ...cost, salt, hash: await deriveScrypt(password, salt, cost, cost.keyLength) })
  }

  it('are warned of, naming the settings and nothing of the hashes', async () => {
    const low = await hashAt(1024, 'pw-1')
    const warningFor = (hashes: string[]) => mixedSettingsWarning(hashes.map((text) => parseScryptHash(text) as ScryptHash))
    expect(warningFor([low, await hashAt(1024, 'pw-2')])).toBeNull()
    const mixed = warningFor([low, await hashAt(2048, 'pw-2')])
    expect(mixed).toContain('N=1024 r=8 p=1 key=64; N=2048 r=8 p=1 key=64')
    expect(mixed).toContain('tell which usernames exist')
    expect(mixed).not.toContain(low.split('$')[4]!)
  })

  it('are warned of at start, in the log', async () => {
    const mixedGw = await startTestGateway({
      auth: {
        users: [
          { username: 'a', password_scrypt: await hashAt(1024, 'pw-1'), scopes: ['objects'] },
          { username: 'b', password_scrypt: await hashAt(2048, 'pw-2'), scopes: ['objects'] },
        ],
      },
      models: [{ name: 'm', backends: [{ url: 'http://127.0.0.1:9' }] }],
    })
    try {
      expect(mixedGw.logLines().filter((line) => String(line.msg).startsWith('auth.users: the password hashes use different scrypt settings'))).toHaveLength(1)
    } finally {
      await mixedGw.shutdown()
    }
  })
})

describe('decodeBasic', () => {
  const encode = (bytes: Buffer | string) => Buffer.from(bytes).toString('base64')

  it('reads user and password, the password with colons and non-ASCII letters', () => {
    expect(decodeBasic(encode('zoë:pä:ss'))).toEqual({ username: 'zoë', password: 'pä:ss' })
  })

  it('refuses control characters: "pw" and "pw" + NUL would derive the same scrypt key', () => {
    for (const text of ['alice:pw\u0000', 'alice:pw\u0000\u0000', 'al\u0000ice:pw', 'alice:p\tw', 'alice:pw\u007f']) expect(decodeBasic(encode(text)), JSON.stringify(text)).toBeNull()
  })

  it('refuses base64 other than the canonical padded form, which Node would decode to the same credentials', () => {
    const canonical = encode('alice:pw')
    expect(canonical).toBe('YWxpY2U6cHc=')
    expect(decodeBasic(canonical)).toEqual({ username: 'alice', password: 'pw' })
    for (const variant of ['YWxpY2U6cHc', 'YWxpY2U6cHd=', 'YWxpY2U6cHc==', 'YWxpY2U6cH=c', 'YWxpY2U6cHc=YQ==', 'YWxpY2U6_Hc=']) {
      expect(Buffer.from(variant, 'base64').toString('utf8').startsWith('alice:'), variant).toBe(true)
      expect(decodeBasic(variant), variant).toBeNull()
    }
  })

  it('refuses bytes that are not UTF-8, which a lenient decoding turned into the same U+FFFD', () => {
    expect(decodeBasic(encode(Buffer.concat([Buffer.from('alice:'), Buffer.from([0xff, 0xfe])])))).toBeNull()
    expect(decodeBasic(encode(Buffer.concat([Buffer.from('alice:'), Buffer.from([0xc3, 0x28])])))).toBeNull()
  })
})
