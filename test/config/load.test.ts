import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { ConfigError, loadConfigFile, parseConfig } from '../../src/config/load.js'
import { GatewayConfigSchema, MAX_TIMER_MS } from '../../src/config/schema.js'
import type { GatewayConfig } from '../../src/config/resolve.js'
import type { ValidationIssue } from '../../src/schemas/validation-issue.js'
import { deriveScrypt, formatScryptHash, hashPassword } from '../../src/auth/scrypt-hash.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const MAIN = join(ROOT, 'dist', 'main.js')

const MODEL = `models:
  - name: m
    backends:
      - url: http://127.0.0.1:8000
`

/** A model's served_name, a key that takes any text, as written in YAML (double-quoted) with `env`. */
function servedName(yamlText: string, env: Record<string, string>): string {
  return ok(`models:\n  - name: m\n    served_name: "${yamlText}"\n    backends: [{ url: "http://a:1" }]\n`, env).models[0]!.served_name
}

function ok(text: string, env: Record<string, string> = {}): GatewayConfig {
  const result = parseConfig(text, env)
  if (!result.ok) throw new Error(`expected a valid config, got ${JSON.stringify(result.issues)}`)
  return result.config
}

function issues(text: string, env: Record<string, string> = {}): ValidationIssue[] {
  const result = parseConfig(text, env)
  if (result.ok) throw new Error('expected an invalid config')
  return result.issues
}

function paths(list: readonly ValidationIssue[]): string[] {
  return list.map((i) => i.path)
}

describe('parseConfig: defaults', () => {
  it('fills every default of a minimal file', () => {
    const config = ok(MODEL)
    expect(config.server).toEqual({ host: '127.0.0.1', port: 8080, body_limit_bytes: 8 * 1024 * 1024, queued_body_limit_bytes: 256 * 1024 * 1024, answer_limit_bytes: 64 * 1024 * 1024, shutdown_grace_ms: 30000, max_connections: 0 })
    expect(config.state).toEqual({ kind: 'memory', key_prefix: 'sluice:' })
    expect(config.auth).toEqual({ keys: [], users: [] })
    expect(config.log).toEqual({ level: 'info' })
    expect(config.upstreams).toEqual({})
    expect(config.default_model).toBe('m')
    expect(config.models).toEqual([
      {
        name: 'm',
        served_name: 'm',
        priority_scheduling: false,
        balance: 'round_robin',
        max_concurrency_per_backend: 64,
        queue: { max_size: 1000, max_wait_ms: 30000 },
        retries: 1,
        timeouts: { connect_ms: 2000, first_byte_ms: 120000, idle_ms: 60000, keep_alive_ms: 4000 },
        health: { path: '/health', interval_ms: 5000, unhealthy_after: 3 },
        backends: [{ url: 'http://127.0.0.1:8000', name: 'http://127.0.0.1:8000', weight: 1 }],
      },
    ])
  })

  it('fills the members of a partly given nested object', () => {
    const config = ok(`${MODEL}    queue: { max_size: 5 }\n    timeouts: { first_byte_ms: 10 }\n    health: { path: /ready }\n`)
    expect(config.models[0]!.queue).toEqual({ max_size: 5, max_wait_ms: 30000 })
    expect(config.models[0]!.timeouts).toEqual({ connect_ms: 2000, first_byte_ms: 10, idle_ms: 60000, keep_alive_ms: 4000 })
    expect(config.models[0]!.health).toEqual({ path: '/ready', interval_ms: 5000, unhealthy_after: 3 })
  })

  // Regression (config review): `check` passed "/health check", and undici refused every health check: never healthy.
  it.each(['/health check', '/health\t', 'health', '/h\u00e9alth'])('refuses the health path %j', (path) => {
    expect(paths(issues(`${MODEL}    health: { path: ${JSON.stringify(path)} }\n`))).toEqual(['models.0.health.path'])
  })

  it('takes a health path with a query or percent-encoding', () => {
    expect(ok(`${MODEL}    health: { path: "/v1/health%20check?full=1" }\n`).models[0]!.health.path).toBe('/v1/health%20check?full=1')
  })

  it('keeps given values over defaults', () => {
    const config = ok(`server: { port: 0, host: 0.0.0.0 }
models:
  - name: first
    served_name: org/first
    backends:
      - { url: "http://a:1", name: gpu-a, weight: 3 }
  - name: second
    backends: [{ url: "http://b:1" }]
default_model: second
`)
    expect(config.server.port).toBe(0)
    expect(config.server.host).toBe('0.0.0.0')
    expect(config.models[0]!.served_name).toBe('org/first')
    expect(config.models[0]!.backends[0]).toEqual({ url: 'http://a:1', name: 'gpu-a', weight: 3 })
    expect(config.models[1]!.served_name).toBe('second')
    expect(config.default_model).toBe('second')
  })

  it('makes the first model the default model', () => {
    const config = ok(`models:
  - { name: one, backends: [{ url: "http://a:1" }] }
  - { name: two, backends: [{ url: "http://b:1" }] }
`)
    expect(config.default_model).toBe('one')
  })
})

describe('parseConfig: environment variables', () => {
  it('replaces ${VAR}', () => {
    expect(ok(`${MODEL}server: { host: "\${HOST}" }\n`, { HOST: '10.0.0.1' }).server.host).toBe('10.0.0.1')
  })

  it('replaces references inside a longer string', () => {
    const config = ok(`models:\n  - name: m\n    backends: [{ url: "http://\${H}:\${P}/v" }]\n`, { H: 'gpu', P: '8000' })
    expect(config.models[0]!.backends[0]!.url).toBe('http://gpu:8000/v')
  })

  it('types a value that is exactly one reference: port ${P} with P=9000 is the number 9000', () => {
    const config = ok(`${MODEL}server:\n  port: \${P}\n`, { P: '9000' })
    expect(config.server.port).toBe(9000)
  })

  it('types a boolean the same way', () => {
    expect(ok(`${MODEL.replace('- name: m', '- name: m\n    priority_scheduling: ${PS}')}`, { PS: 'true' }).models[0]!.priority_scheduling).toBe(true)
  })

  // Regression (audit): DESIGN.md writes `api_key: ${VLLM_API_KEY:-}` unquoted; a numeric or boolean
  // key was refused as "must be a string", and 0123 would have read as 123.
  it.each(['12345', '0123', 'true', '1e3'])('keeps the text of an unquoted reference under a key that takes a string: %s', (value) => {
    const config = ok(`models:
  - name: m
    backends:
      - url: http://a:1
        api_key: \${KEY}
upstreams:
  training:
    url: http://t:1
    auth:
      bearer: \${KEY}
server:
  port: \${P}
`, { KEY: value, P: '9000' })
    expect(config.models[0]!.backends[0]!.api_key).toBe(value)
    expect(config.upstreams.training!.auth).toEqual({ bearer: value })
    expect(config.server.port).toBe(9000)
  })

  // Regression (audit): only the union's "must be one of { bearer: TOKEN }, …" was reported, not which member to fix.
  it('names an upstream bearer or Basic username that a set-but-empty variable left empty', () => {
    const text = `${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { bearer: "\${T}" } }\n  objects: { url: "http://o:1", auth: { basic: { username: "\${U}", password: p } } }\n`
    const found = issues(text, { T: '', U: '' })
    expect(found).toContainEqual({ path: 'upstreams.training.auth.bearer', message: expect.stringContaining('is empty') })
    expect(found).toContainEqual({ path: 'upstreams.objects.auth.basic.username', message: expect.stringContaining('is empty') })
  })

  // Regression (docs review): an unquoted numeric token or password got only the union's "must be one of
  // { bearer: TOKEN }, …", though the README promises "(got a number)"; and an empty one was said twice.
  it('names an upstream credential of the wrong type, and an empty one once', () => {
    const text = `${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { bearer: 12345 } }\n  objects: { url: "http://o:1", auth: { basic: { username: api, password: 012345 } } }\n  checkpoints: { url: "http://c:1", auth: { token: x } }\n`
    expect(issues(text)).toEqual([
      { path: 'upstreams.training.auth.bearer', message: 'must be a string (got a number)' },
      { path: 'upstreams.checkpoints.auth', message: expect.stringContaining('must be one of { bearer: TOKEN }') },
      { path: 'upstreams.objects.auth.basic.password', message: 'must be a string (got a number)' },
    ])
    expect(JSON.stringify(issues(text))).not.toContain('12345')
    const empty = issues(`${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { bearer: "\${T}" } }\n`, { T: '' })
    expect(empty).toEqual([{ path: 'upstreams.training.auth.bearer', message: expect.stringContaining('is empty') }])
  })

  it('uses the fallback of ${VAR:-default} when VAR is unset or empty, typed too', () => {
    const text = `${MODEL}server:\n  port: \${P:-8123}\n`
    expect(ok(text).server.port).toBe(8123)
    expect(ok(text, { P: '' }).server.port).toBe(8123)
    expect(ok(text, { P: '9001' }).server.port).toBe(9001)
  })

  it('accepts an empty fallback', () => {
    const config = ok(`models:\n  - name: m\n    backends: [{ url: "http://a:1", api_key: "\${KEY:-}" }]\n`)
    expect(config.models[0]!.backends[0]!.api_key).toBe('')
  })

  it('keeps a value that contains YAML syntax as a string', () => {
    expect(servedName('${H}', { H: 'a: [b]' })).toBe('a: [b]')
  })

  it('does not expand references inside a substituted value', () => {
    expect(servedName('${H}', { H: '${OTHER}', OTHER: 'x' })).toBe('${OTHER}')
  })

  // Regression: these stayed in the value as literal text, so a typo'd reference went upstream as the credential.
  it.each(['${vllm-key}', '${TOKEN', 'sk-${}', '${1ST}'])('reports %s, which starts no variable reference, at its key', (value) => {
    const found = issues(`${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { bearer: "${value}" } }\n`, { TOKEN: 't' })
    expect(found).toEqual([{ path: 'upstreams.training.auth.bearer', message: expect.stringContaining('starts no variable reference') }])
  })

  it('reports a reference nested in a fallback, which would stay literal text', () => {
    const found = issues(`${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { bearer: "\${A:-\${B}}" } }\n`, { B: 'b' })
    expect(found).toEqual([{ path: 'upstreams.training.auth.bearer', message: expect.stringContaining('nests a reference') }])
  })

  it('$${ writes a literal ${, next to a reference', () => {
    expect(servedName('a$${B}-${C}', { C: 'c' })).toBe('a${B}-c')
  })

  it('reports an unset ${VAR} at the path of its key', () => {
    expect(issues(`${MODEL}server: { host: "\${NOPE}" }\n`)).toEqual([
      { path: 'server.host', message: expect.stringContaining('NOPE') },
    ])
  })

  it('reports every unset variable', () => {
    const found = issues(`models:\n  - name: "\${A}"\n    backends: [{ url: "http://\${B}:1" }]\n`)
    expect(paths(found).sort()).toEqual(['models.0.backends.0.url', 'models.0.name'])
    expect(found.map((i) => i.message).join(' ')).toMatch(/\bA\b.*\bB\b|\bB\b.*\bA\b/)
  })
})

describe('parseConfig: errors', () => {
  it('reports an unknown key, a wrong type and an unset ${VAR} together, each with its dotted path', () => {
    const found = issues(`server:
  port: abc
  bogus: 1
models:
  - name: m
    backends:
      - url: \${BACKEND_URL}
`)
    expect(found).toHaveLength(3)
    expect(found).toContainEqual({ path: 'server.bogus', message: 'is not a known key' })
    expect(found).toContainEqual({ path: 'server.port', message: 'must be an integer (got a string)' })
    expect(found).toContainEqual({ path: 'models.0.backends.0.url', message: 'environment variable BACKEND_URL is not set' })
  })

  it('names the key a misspelt one was meant to be, at any depth', () => {
    const found = issues(`server: { prot: 8080 }
models:
  - name: m
    backend:
      - url: http://127.0.0.1:8000
`)
    expect(found).toContainEqual({ path: 'server.prot', message: 'is not a known key (did you mean "port"?)' })
    expect(found).toContainEqual({ path: 'models.0.backend', message: 'is not a known key (did you mean "backends"?)' })
    expect(found).toContainEqual({ path: 'models.0.backends', message: 'is required' })
  })

  it('reports problems deep in lists with their index', () => {
    const found = issues(`models:
  - name: m
    balance: fastest
    backends:
      - url: http://a:1
      - url: ftp://b
        weight: 0
`)
    expect(paths(found).sort()).toEqual(['models.0.backends.1.url', 'models.0.backends.1.weight', 'models.0.balance'])
    expect(found.find((i) => i.path === 'models.0.balance')?.message).toContain('round_robin')
  })

  it('requires at least one model, each with a name and a backend', () => {
    expect(issues('server: { port: 1 }\n')).toEqual([{ path: 'models', message: 'is required' }])
    expect(paths(issues('models: []\n'))).toEqual(['models'])
    expect(paths(issues('models:\n  - backends: [{ url: "http://a:1" }]\n'))).toEqual(['models.0.name'])
    expect(paths(issues('models:\n  - name: m\n    backends: []\n'))).toEqual(['models.0.backends'])
  })

  it("refuses a duration past Node's timer limit (2^31 - 1 ms), which would fire after 1 ms", () => {
    const at = (ms: number) => `server: { shutdown_grace_ms: ${ms} }
models:
  - name: m
    queue: { max_wait_ms: ${ms} }
    timeouts: { connect_ms: ${ms}, first_byte_ms: ${ms}, idle_ms: ${ms}, keep_alive_ms: ${ms} }
    health: { interval_ms: ${ms} }
    backends: [{ url: "http://a:1" }]
`
    expect(ok(at(MAX_TIMER_MS)).server.shutdown_grace_ms).toBe(2147483647)
    const found = issues(at(MAX_TIMER_MS + 1))
    expect(paths(found).sort()).toEqual(
      ['server.shutdown_grace_ms', 'models.0.queue.max_wait_ms', 'models.0.timeouts.connect_ms', 'models.0.timeouts.first_byte_ms', 'models.0.timeouts.idle_ms', 'models.0.timeouts.keep_alive_ms', 'models.0.health.interval_ms'].sort(),
    )
    expect(found.every((i) => i.message === 'must be <= 2147483647')).toBe(true)
  })

  it('refuses a redis_url no URL parser reads, without quoting it (it may hold a password)', () => {
    const found = issues(`state: { kind: redis, redis_url: "redis://u:Secret9@127.0.0.1:99999" }\n${MODEL}`)
    expect(found).toEqual([{ path: 'state.redis_url', message: expect.stringContaining('is not a valid URL') }])
    expect(JSON.stringify(found)).not.toContain('Secret9')
    expect(ok(`state: { kind: redis, redis_url: "redis://:pw@127.0.0.1:6379/0?password=x" }\n${MODEL}`).state.redis_url).toBe('redis://:pw@127.0.0.1:6379/0?password=x')
  })

  // Regression (config review): `redis://` (as `redis://${REDIS_HOST:-}` with the variable empty) passed check,
  // and ioredis would have taken localhost:6379.
  it.each(['redis://', 'rediss://', 'redis:///0'])('refuses a redis_url with no host (%s)', (url) => {
    const found = issues(`state: { kind: redis, redis_url: "${url}" }\n${MODEL}`)
    expect(found).toEqual([{ path: 'state.redis_url', message: expect.stringContaining('has no host') }])
  })

  // Regression (security audit): both passed check, then `/notadb` ended the process after it
  // announced it was listening (SELECT NaN), and a bare % in the password threw a URIError at start.
  it('refuses a redis_url whose path is not a database number or whose userinfo has a broken %-escape, quoting neither', () => {
    const redisAt = (url: string) => issues(`state: { kind: redis, redis_url: "${url}" }\n${MODEL}`)
    expect(redisAt('redis://127.0.0.1:6379/notadb')).toEqual([{ path: 'state.redis_url', message: expect.stringContaining('not a database number') }])
    const broken = redisAt('redis://:Pa%zzSECRET@127.0.0.1:6379')
    expect(broken).toEqual([{ path: 'state.redis_url', message: expect.stringContaining('broken %-escape') }])
    expect(JSON.stringify(broken)).not.toContain('SECRET')
    for (const fine of ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379/', 'redis://127.0.0.1:6379/3', 'redis://:Pa%25ss@127.0.0.1:6379/0', 'redis://redis.internal:6379', 'rediss://[::1]:6380']) {
      expect(parseConfig(`state: { kind: redis, redis_url: "${fine}" }\n${MODEL}`, {}).ok, fine).toBe(true)
    }
  })

  // Regression (ops review, session 27): URL parsing checks no IPv4 address in a redis:// URL; the typo passed check.
  it.each(['redis://10.0.0.256:6379', 'redis://127.1:6379/0'])('refuses a redis_url whose host is a number that is no IPv4 address (%s)', (url) => {
    expect(issues(`state: { kind: redis, redis_url: "${url}" }\n${MODEL}`)).toEqual([{ path: 'state.redis_url', message: expect.stringContaining('neither an IPv4 address') }])
  })

  it('refuses a metrics_port equal to the port, given or default, which could not both be listened on', () => {
    expect(issues(`server: { port: 9000, metrics_port: 9000 }\n${MODEL}`)).toEqual([{ path: 'server.metrics_port', message: expect.stringContaining('must differ from server.port (9000)') }])
    expect(paths(issues(`server: { metrics_port: 8080 }\n${MODEL}`))).toEqual(['server.metrics_port'])
    expect(ok(`server: { port: 0, metrics_port: 0 }\n${MODEL}`).server.metrics_port).toBe(0)
  })

  it('refuses a queued_body_limit_bytes below body_limit_bytes, given or default: a body that large could never wait', () => {
    expect(issues(`server: { body_limit_bytes: 4096, queued_body_limit_bytes: 4095 }\n${MODEL}`)).toEqual([{ path: 'server.queued_body_limit_bytes', message: expect.stringContaining('at least server.body_limit_bytes (4096)') }])
    expect(paths(issues(`server: { queued_body_limit_bytes: 1048576 }\n${MODEL}`))).toEqual(['server.queued_body_limit_bytes'])
    expect(ok(`server: { body_limit_bytes: 4096, queued_body_limit_bytes: 4096 }\n${MODEL}`).server.queued_body_limit_bytes).toBe(4096)
  })

  it('does not echo an unknown key that looks like "name:value" with the space missing: it may be a secret', () => {
    const found = issues(`models:\n  - name: m\n    backends: [{ url: "http://a:1", api_key:sk-Typo4242 }]\n`)
    expect(found).toEqual([{ path: 'models.0.backends.0.<key with ":" or a space>', message: expect.stringContaining('is not a known key') }])
    expect(JSON.stringify(found)).not.toContain('Typo4242')
  })

  // Regression (config review): `check` printed such a key to the terminal as it was, escape sequences and all.
  it('does not echo an unknown key holding a control character', () => {
    const found = issues(`${MODEL}    "\\e[31mred": 2\n`)
    expect(found).toEqual([{ path: 'models.0.<key with a control character>', message: 'is not a known key' }])
  })

  // Regression (security review, 2026-11-28): `check`, the start-up error and a refused reload printed this key.
  it('does not echo an unknown key beside a credential: an unquoted value with a comma in a flow mapping', () => {
    const found = issues(`models:\n  - name: m\n    backends: [{ url: "http://a:1", name: gpu, api_key: sk-a,TAIL-Secret4242 }]\n`)
    expect(found).toEqual([{ path: 'models.0.backends.0.<unknown key>', message: expect.stringContaining('is not a known key') }])
    expect(JSON.stringify(found)).not.toContain('Secret4242')
    const upstream = issues(`${MODEL}upstreams:\n  training: { url: "http://a:1", auth: { bearer: tok,TAIL-Secret5353 } }\n`)
    expect(JSON.stringify(upstream)).not.toContain('Secret5353')
  })

  // Regression (design review, session 24): asked of the schema alone, every unknown key of a backend or of
  // `state` was hidden with no credential in the file, and two such keys read the same.
  it('names an unknown key in an object that could hold a credential but holds none', () => {
    const found = issues(`state: { kind: memory, timeout: 5 }\nmodels:\n  - name: m\n    backends: [{ url: "http://a:1", label: gpu }]\n`)
    expect(found).toEqual(
      expect.arrayContaining([
        { path: 'state.timeout', message: 'is not a known key' },
        { path: 'models.0.backends.0.label', message: 'is not a known key' },
      ]),
    )
  })

  // Regression (code review, session 24): asked of the mapping, a misspelt credential key let the piece through.
  it('does not echo an unknown key beside a misspelt credential key either', () => {
    const found = issues(`models:\n  - name: m\n    backends: [{ url: "http://a:1", api_kye: sk-live-abc,def123secret }]\n`)
    expect(JSON.stringify(found)).not.toContain('def123secret')
    expect(found).toContainEqual({ path: 'models.0.backends.0.<unknown key>', message: expect.stringContaining('is not a known key') })
  })

  it('still names an unknown key beside a credential when it is a near miss of a known one', () => {
    expect(issues(`models:\n  - name: m\n    backends: [{ url: "http://a:1", weigth: 2, api_key: sk-1 }]\n`)).toEqual([{ path: 'models.0.backends.0.weigth', message: 'is not a known key (did you mean "weight"?)' }])
  })

  it('reports a YAML alias bomb as a problem, not a crash', () => {
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x]']
    for (let i = 1; i < 9; i++) levels.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(9).fill(`*${String.fromCharCode(96 + i)}`).join(', ')}]`)
    const found = issues(`${levels.join('\n')}\n${MODEL}`)
    expect(found).toEqual([{ path: '', message: expect.stringMatching(/^YAML: .*alias/i) }])
  })

  it('reports duplicate model names', () => {
    const found = issues(`models:
  - { name: m, backends: [{ url: "http://a:1" }] }
  - { name: m, backends: [{ url: "http://b:1" }] }
`)
    expect(found).toEqual([{ path: 'models.1.name', message: expect.stringContaining('models.0.name') }])
  })

  // Clients' user-ids are compared in NFC (RFC 7617 §2.1): two spellings of one name would shadow each other.
  it('reports usernames that are one name in two Unicode normal forms', () => {
    const hash = 'scrypt$16384$8$1$c2FsdHNhbHRzYWx0c2FsdA==$' + Buffer.alloc(64, 1).toString('base64')
    const found = issues(`auth:
  users:
    - { username: "j\u00fcrgen", password_scrypt: "${hash}", scopes: [objects] }
    - { username: "ju\u0308rgen", password_scrypt: "${hash}", scopes: [objects] }
${MODEL}`)
    expect(found).toEqual([{ path: 'auth.users.1.username', message: expect.stringContaining('duplicates auth.users.0.username') }])
  })

  it('reports duplicate backend names within a model, including the url default', () => {
    const found = issues(`models:
  - name: m
    backends:
      - { url: "http://a:1" }
      - { url: "http://a:1" }
`)
    expect(paths(found)).toEqual(['models.0.backends.1.name', 'models.0.backends.1.url'])
  })

  // Regression: accepted, and the one server then got twice max_concurrency_per_backend.
  it('reports one server listed twice in a model under two names, however its URL is spelled', () => {
    const found = issues(`models:
  - name: m
    backends:
      - { url: "http://gpu-a:8000", name: a }
      - { url: "http://b:1", name: b }
      - { url: "http://GPU-A:8000/", name: a2 }
`)
    expect(found).toEqual([{ path: 'models.0.backends.2.url', message: expect.stringContaining('duplicates models.0.backends.0.url') }])
    expect(found[0]!.message).toContain('max_concurrency_per_backend')
  })

  it('accepts one server behind two models, and two path prefixes on one host', () => {
    const config = ok(`models:
  - { name: m1, backends: [{ url: "http://gpu-a:8000" }] }
  - { name: m2, backends: [{ url: "http://gpu-a:8000" }, { url: "http://gpu-a:8000/v2" }] }
`)
    expect(config.models[1]!.backends.map((b) => b.name)).toEqual(['http://gpu-a:8000', 'http://gpu-a:8000/v2'])
  })

  it('reports a default_model that names no model, listing the models', () => {
    const found = issues(`${MODEL}default_model: other\n`)
    expect(found).toEqual([{ path: 'default_model', message: expect.stringContaining('m') }])
    expect(found[0]!.message).toContain('names no configured model')
  })

  it('lists each model once after a default_model that names none, even when a name is duplicated', () => {
    const found = issues(`models:\n  - { name: m1, backends: [{ url: "http://a:1" }] }\n  - { name: m1, backends: [{ url: "http://b:1" }] }\ndefault_model: other\n`)
    expect(found.find((issue) => issue.path === 'default_model')?.message).toBe('names no configured model (have: m1)')
  })

  // Regression (audit): key_prefix "{}" became every key's hash tag, and every script failed with CROSSSLOT on a cluster.
  it('refuses a key_prefix with a brace', () => {
    for (const prefix of ['{}', 'a{b', 'x}']) {
      expect(paths(issues(`${MODEL}state: { kind: redis, redis_url: "redis://h:1", key_prefix: "${prefix}" }\n`))).toEqual(['state.key_prefix'])
    }
    expect(ok(`${MODEL}state: { kind: redis, redis_url: "redis://h:1", key_prefix: "team-a:" }\n`).state.key_prefix).toBe('team-a:')
  })

  it('requires redis_url when state.kind is redis', () => {
    expect(issues(`${MODEL}state: { kind: redis }\n`)).toEqual([{ path: 'state.redis_url', message: expect.stringContaining('redis') }])
    expect(ok(`${MODEL}state: { kind: redis, redis_url: "redis://127.0.0.1:6379" }\n`).state.redis_url).toBe('redis://127.0.0.1:6379')
  })

  it('refuses an unknown state kind', () => {
    expect(paths(issues(`${MODEL}state: { kind: etcd }\n`))).toEqual(['state.kind'])
  })

  it('reports invalid YAML', () => {
    const found = issues('server: [\n')
    expect(found).toHaveLength(1)
    expect(found[0]!.path).toBe('')
    expect(found[0]!.message).toMatch(/^YAML: /)
  })

  // Regression (conformance audit): yaml reports an unclosed flow map twice at one place, and `check` listed it twice.
  it('lists a YAML problem reported twice at one place once', () => {
    expect(issues('models: [ { name: a\n')).toEqual([{ path: '', message: 'YAML: bad indentation, or a bracket or brace not closed (BAD_INDENT) at line 2, column 1' }])
  })

  it('reports a key given twice as invalid YAML', () => {
    const found = issues(`server:\n  port: 1\n  port: 2\n${MODEL}`)
    expect(found[0]!.message).toMatch(/^YAML: a key given twice in one mapping \(DUPLICATE_KEY\) at line 3, column 3$/)
  })

  // Regression: yaml's pretty errors quoted the broken line, secret and all,
  // into `check` and the reload's error log line.
  it('reports a YAML syntax error by line and column, never quoting the line', () => {
    const found = issues(`${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { bearer: "TOPSECRET-bearer } }\n`)
    expect(found.length).toBeGreaterThan(0)
    for (const issue of found) expect(issue.message).toMatch(/^YAML: .* \([A-Z_]+\) at line \d+, column \d+$/)
    expect(JSON.stringify(found)).not.toContain('TOPSECRET')
  })

  // Regression (security audit): yaml's own messages name the offending token, and an unquoted
  // secret starting with *, ! or a bad escape is that token; an unknown tag (a warning) silently
  // dropped the secret's first word.
  it.each([
    ['an alias', 'password: *STAR2xyz', 'BAD_ALIAS'],
    ['a tag handle', 'password: !x!TAGHANDLE9secret rest', 'TAG_RESOLVE_FAILED'],
    ['an unknown tag (a warning in yaml)', 'password: !abcSECRETtag rest', 'TAG_RESOLVE_FAILED'],
    ['a bad escape', 'password: "ab\\uZZZZSECRET"', 'BAD_DQ_ESCAPE'],
  ])('refuses %s in a secret without quoting any of it', (_name, line, code) => {
    const found = issues(`${MODEL}upstreams:\n  objects:\n    url: "http://o:1"\n    auth:\n      basic:\n        username: api\n        ${line}\n`)
    expect(found).toHaveLength(1)
    expect(found[0]!.message).toContain(`(${code})`)
    for (const secret of ['STAR2xyz', 'TAGHANDLE9secret', 'abcSECRETtag', 'ZZZZSECRET', 'uZZZZ']) expect(JSON.stringify(found)).not.toContain(secret)
  })

  // Regression (an operator audit): yaml throws for an alias naming no anchor, with no position.
  it('says where an alias naming no anchor is', () => {
    const found = issues(`${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { bearer: *sk-live-SECRET } }\n`)
    expect(found).toHaveLength(1)
    expect(found[0]!.message).toMatch(/\(BAD_ALIAS\) at line \d+, column \d+$/)
    expect(JSON.stringify(found)).not.toContain('SECRET')
  })

  it('reports a document that is not a mapping', () => {
    expect(issues('- a\n')).toEqual([{ path: '', message: 'must be an object (got an array)' }])
  })

  it('refuses an upstream auth that is none of the allowed forms', () => {
    const found = issues(`${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { token: x } }\n`)
    expect(paths(found)).toEqual(['upstreams.training.auth'])
    expect(found[0]!.message).toContain('bearer')
  })

  it('accepts every upstream auth form', () => {
    const config = ok(`${MODEL}upstreams:
  training: { url: "http://t:1", auth: { bearer: tok } }
  checkpoints: { url: "http://t:1", auth: { forward_client: true } }
  objects: { url: "http://o:1", auth: { basic: { username: api, password: pw } } }
`)
    expect(config.upstreams.training?.auth).toEqual({ bearer: 'tok' })
    expect(config.upstreams.checkpoints?.auth).toEqual({ forward_client: true })
    expect(config.upstreams.objects?.auth).toEqual({ basic: { username: 'api', password: 'pw' } })
  })
})

/**
 * Regressions: credentials `check` passed and the gateway then could not
 * use, or leaked (src/config/credential-rules.ts).
 */
describe('parseConfig: credentials for backends and upstreams', () => {
  const upstreamWith = (auth: string) => `${MODEL}upstreams:\n  training: { url: "http://t:1", auth: ${auth} }\n`

  it('refuses an upstream bearer with a trailing line break, saying so, when it comes from a variable', () => {
    const found = issues(upstreamWith('{ bearer: "${T}" }'), { T: 'upstream-token\n' })
    expect(found).toEqual([{ path: 'upstreams.training.auth.bearer', message: expect.stringContaining('line break') as unknown as string }])
  })

  it('refuses header secrets a header cannot carry: CR LF injection, controls, beyond ASCII, edge spaces', () => {
    for (const token of ['tok\r\nX-Injected: 1', 'tok\u0000en', 'tökén-ünicode€', ' tok', 'tok ']) {
      expect(paths(issues(upstreamWith('{ bearer: "${T}" }'), { T: token })), JSON.stringify(token)).toEqual(['upstreams.training.auth.bearer'])
    }
  })

  it('refuses a backend api_key a header cannot carry', () => {
    const found = issues('models:\n  - name: m\n    backends: [{ url: "http://127.0.0.1:8000", api_key: "${K}" }]\n', { K: 'key\n' })
    expect(paths(found)).toEqual(['models.0.backends.0.api_key'])
  })

  it('refuses a Basic username with ":" and Basic halves with control characters', () => {
    const basic = upstreamWith('{ basic: { username: "${U}", password: "${P}" } }').replace('training', 'objects')
    expect(paths(issues(basic, { U: 'api:extra', P: 'pw' }))).toEqual(['upstreams.objects.auth.basic.username'])
    expect(paths(issues(basic, { U: 'api', P: 'pw\n' }))).toEqual(['upstreams.objects.auth.basic.password'])
    // Anything else goes: Basic credentials travel base64-encoded.
    expect(ok(basic, { U: 'ünï', P: 'p: w€' }).upstreams.objects?.auth).toEqual({ basic: { username: 'ünï', password: 'p: w€' } })
  })

  // Regression (an operator audit): `$VLLM_API_KEY` (no braces) passed check and went upstream as the
  // literal text; the upstream's 401 reached the client as if its own key were wrong.
  it('refuses a credential written as $NAME in the file, without repeating it', () => {
    const found = issues(`models:
  - name: m
    backends: [{ url: "http://127.0.0.1:8000", api_key: $VLLM_API_KEY }]
upstreams:
  training: { url: "http://t:1", auth: { bearer: "$TRAINING_TOKEN" } }
  objects: { url: "http://o:1", auth: { basic: { username: api, password: "$OBJECTS_PASSWORD" } } }
`)
    expect(paths(found)).toEqual(['models.0.backends.0.api_key', 'upstreams.training.auth.bearer', 'upstreams.objects.auth.basic.password'])
    expect(found[0]!.message).toContain('write ${NAME}')
    for (const name of ['VLLM_API_KEY', 'TRAINING_TOKEN', 'OBJECTS_PASSWORD']) expect(JSON.stringify(found)).not.toContain(name)
  })

  // Regression (review): judged after interpolation, a password that came from the environment and
  // started with $ was refused, and printed; so was the documented escape $${…}.
  it('judges the file as written: a value from the environment, the $${ escape and a $-password pass', () => {
    const config = ok(
      `models:
  - name: m
    backends: [{ url: "http://127.0.0.1:8000", api_key: "$$\{LITERAL}" }]
upstreams:
  training: { url: "http://t:1", auth: { bearer: "\${TOKEN}" } }
  objects: { url: "http://o:1", auth: { basic: { username: api, password: "$ecretPassw0rd" } } }
`,
      { TOKEN: '$SUMMER2024' },
    )
    expect(config.models[0]!.backends[0]!.api_key).toBe('${LITERAL}')
    expect(config.upstreams.training?.auth).toEqual({ bearer: '$SUMMER2024' })
    expect(config.upstreams.objects?.auth).toEqual({ basic: { username: 'api', password: '$ecretPassw0rd' } })
  })

  // Regression (an operator audit): the OpenAI clients' base URL habit passed check, and the gateway
  // then sent chat to …/v1/v1/chat/completions and its health checks to …/v1/health.
  it('refuses a backend, training or checkpoints URL ending in /v1; the objects upstream may', () => {
    const found = issues(`models:
  - name: m
    backends: [{ url: "http://127.0.0.1:8000/v1" }, { url: "http://127.0.0.1:8001/vllm/v1/", name: b }]
upstreams:
  training: { url: "https://t:1/v1" }
  checkpoints: { url: "https://t:1/api" }
  objects: { url: "https://o:1/v1" }
`)
    expect(paths(found)).toEqual(['models.0.backends.0.url', 'models.0.backends.1.url', 'upstreams.training.url'])
    expect(found[0]!.message).toContain('give the server’s root')
  })

  it('names the repeated value of a duplicate, but not a token hash', () => {
    const found = issues(`models:
  - name: llama
    backends: [{ url: "http://127.0.0.1:8000" }]
  - name: llama
    backends: [{ url: "http://127.0.0.1:8001" }]
auth:
  keys:
    - { id: a, token_sha256: "${'ab'.repeat(32)}", scopes: [chat] }
    - { id: b, token_sha256: "${'ab'.repeat(32)}", scopes: [chat] }
`)
    expect(found).toEqual([
      { path: 'models.1.name', message: 'duplicates models.0.name ("llama")' },
      { path: 'auth.keys.1.token_sha256', message: 'duplicates auth.keys.0.token_sha256' },
    ])
  })

  it('refuses a server.host with a port in it, and takes hosts and IPv6 addresses', () => {
    expect(issues('server: { host: "localhost:8080" }\n' + MODEL)).toEqual([{ path: 'server.host', message: expect.stringContaining('give the host alone') }])
    for (const host of ['0.0.0.0', '::', '::1', 'gateway.internal', 'fe80::1%eth0', 'sluice_gateway', 'localhost.', '10.0.0.255', '3com.example', 'node-1.k8s']) expect(ok(`server: { host: "${host}" }\n${MODEL}`).server.host).toBe(host)
  })

  // Regression (operator audit): check passed these, and serve failed with getaddrinfo ENOTFOUND.
  it.each([
    ['[::1]:8080', 'give it bare (::1), and the port in server.port'],
    ['[::1]', 'give it bare (::1)'],
    ['http://localhost', 'must be an IP address'],
    ['local host', 'must be an IP address'],
    ['-gateway', 'must be an IP address'],
    ['a..b', 'must be an IP address'],
    // Regression (ops review, session 27): check passed these; serve failed, or listened elsewhere.
    ['10.0.0.256', 'neither an IPv4 address'],
    ['300.1.1.1', 'neither an IPv4 address'],
    ['127.0.0.1.1', 'neither an IPv4 address'],
    ['1.2.3', 'neither an IPv4 address'],
    ['127.1', 'neither an IPv4 address'],
    ['0x7f000001', 'neither an IPv4 address'],
    ['gateway.123', 'neither an IPv4 address'],
  ])('refuses server.host %j, saying what to write', (host, message) => {
    expect(issues(`server: { host: "${host}" }\n${MODEL}`)).toEqual([{ path: 'server.host', message: expect.stringContaining(message) }])
  })

  it('refuses user:password@ in backend and upstream URLs', () => {
    const found = issues(`models:
  - name: m
    backends: [{ url: "http://vllm:secret@127.0.0.1:8000" }]
upstreams:
  objects: { url: "http://api:secret@o:1" }
`)
    expect(paths(found)).toEqual(['models.0.backends.0.url', 'upstreams.objects.url'])
    expect(JSON.stringify(found)).not.toContain('secret')
  })

  // Regression: these passed `check`, then the gateway failed to start with a TypeError (or dropped the query).
  it.each(['http://127.0.0.1:99999', 'http://127.0.0.1:0', 'http://[::1', 'http://%zz', 'http://a:b:c', 'https://x:-1', 'http://h/base?tenant=7', 'http://h/base#frag'])(
    'refuses %s as a backend and an upstream URL',
    (url) => {
      const found = issues(`models:\n  - name: m\n    backends: [{ url: "${url}" }]\nupstreams:\n  training: { url: "${url}" }\n`)
      expect(paths(found)).toEqual(['models.0.backends.0.url', 'upstreams.training.url'])
    },
  )

  it('accepts the usual forms: a token of letters, digits and -._~+/=, a path with @ after the host', () => {
    const config = ok(`models:
  - name: m
    backends: [{ url: "http://127.0.0.1:8000/v1@x", api_key: "sk-Ab.9_~+/=" }]
upstreams:
  training: { url: "https://t:1/base", auth: { bearer: "eyJhbGciOi.J9x-_" } }
`)
    expect(config.models[0]!.backends[0]!.api_key).toBe('sk-Ab.9_~+/=')
  })
})

/**
 * Regressions: quoting decides a substituted value's type, and `check`
 * lists every problem (DESIGN.md "Configuration").
 */
describe('parseConfig: quoting, echoes and complete reports', () => {
  // A quoted reference stays a string, whatever its value looks like.
  it('a quoted "${T}" whose value looks like a number stays a string (bearer token)', () => {
    const config = ok(`${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { bearer: "\${T}" } }\n`, { T: '123456' })
    expect(config.upstreams.training?.auth).toEqual({ bearer: '123456' })
  })

  it('a quoted "${P}" password with a leading zero keeps its digits', () => {
    const config = ok(`${MODEL}upstreams:\n  objects: { url: "http://o:1", auth: { basic: { username: api, password: "\${P}" } } }\n`, { P: '0123' })
    expect(config.upstreams.objects?.auth).toEqual({ basic: { username: 'api', password: '0123' } })
  })

  it('a quoted "${X}" key_prefix of "true" stays a string', () => {
    expect(ok(`${MODEL}state: { key_prefix: "\${X}" }\n`, { X: 'true' }).state.key_prefix).toBe('true')
  })

  // src/config/load.ts drops schema issues at the unset variable's own path only;
  // the empty value then fails the auth anyOf one level up, a second, misleading issue.
  it('an unset variable in an upstream bearer is reported once, not also as a wrong auth form', () => {
    expect(issues(`${MODEL}upstreams:\n  training: { url: "http://t:1", auth: { bearer: "\${TOKEN}" } }\n`)).toEqual([
      { path: 'upstreams.training.auth.bearer', message: 'environment variable TOKEN is not set' },
    ])
  })

  // The same filter hides "is not a known key" when the unknown key's value is an unset variable.
  it('an unknown key whose value is an unset variable is still reported as unknown', () => {
    expect(issues(`${MODEL}server: { bogus: "\${NOPE}" }\n`)).toContainEqual({ path: 'server.bogus', message: 'is not a known key' })
  })

  // src/config/load.ts runs resolveConfig (duplicates, default_model, redis_url) only
  // when the schema passed, so these problems are not listed next to schema ones.
  it('lists a duplicate model name together with an unknown key', () => {
    const found = issues(`server: { bogus: 1 }
models:
  - { name: m, backends: [{ url: "http://a:1" }] }
  - { name: m, backends: [{ url: "http://b:1" }] }
`)
    expect(paths(found).sort()).toEqual(['models.1.name', 'server.bogus'])
  })
})

describe('loadConfigFile and `check`', () => {
  let dir: string

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sluice-config-'))
  })

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  interface Run {
    code: number
    stdout: string
    stderr: string
  }

  /** Runs the built CLI with only PATH (and `env`) in its environment. */
  function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
    return new Promise((resolve) => {
      execFile(process.execPath, [MAIN, ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } }, (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1
        resolve({ code, stdout, stderr })
      })
    })
  }

  async function file(name: string, text: string): Promise<string> {
    const path = join(dir, name)
    await writeFile(path, text)
    return path
  }

  it('loadConfigFile throws a ConfigError listing every issue', async () => {
    const path = await file('bad-load.yaml', 'server:\n  port: abc\n  bogus: 1\n' + MODEL)
    const error = await loadConfigFile(path, {}).then(
      () => null,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(ConfigError)
    expect(paths((error as ConfigError).issues).sort()).toEqual(['server.bogus', 'server.port'])
    expect((error as ConfigError).message).toContain('server.bogus: is not a known key')
  })

  it('loadConfigFile reports a file that cannot be read', async () => {
    await expect(loadConfigFile(join(dir, 'missing.yaml'), {})).rejects.toThrow(/cannot read file/)
  })

  it('check exits 1 and prints each problem as `path: message`', async () => {
    const path = await file(
      'bad.yaml',
      `server:
  port: abc
  bogus: 1
models:
  - name: m
    backends:
      - url: \${BACKEND_URL}
`,
    )
    const run = await cli(['check', '--config', path])
    expect(run.code).toBe(1)
    const lines = run.stdout.trim().split('\n').sort()
    expect(lines).toEqual([
      'models.0.backends.0.url: environment variable BACKEND_URL is not set',
      'server.bogus: is not a known key',
      'server.port: must be an integer (got a string)',
    ])
  })

  it('check reads variables from its environment', async () => {
    const path = await file('env.yaml', 'models:\n  - name: m\n    backends: [{ url: "${BACKEND_URL}" }]\n')
    const run = await cli(['check', '--config', path], { BACKEND_URL: 'http://127.0.0.1:9' })
    expect(run.stdout).toContain('ok')
    expect(run.code).toBe(0)
  })

  it('check says when the users’ scrypt settings differ (timing tells which users exist), and still exits 0', async () => {
    const at = async (N: number) => {
      const salt = randomBytes(16)
      const cost = { N, r: 8, p: 1, keyLength: 64 }
      return formatScryptHash({ ...cost, salt, hash: await deriveScrypt('pw', salt, cost, 64) })
    }
    const users = [
      { username: 'a', password_scrypt: await at(1024), scopes: ['objects'] },
      { username: 'b', password_scrypt: await at(2048), scopes: ['objects'] },
    ]
    const run = await cli(['check', '--config', await file('mixed-users.yaml', `auth:\n  users: ${JSON.stringify(users)}\n${MODEL}`)])
    expect(run.code).toBe(0)
    expect(run.stdout).toContain('warning: auth.users: the password hashes use different scrypt settings (N=1024 r=8 p=1 key=64; N=2048 r=8 p=1 key=64)')
  })

  it('check says when a key or a user has no scopes (every request refused), and still exits 0', async () => {
    const text = `auth:
  keys: [{ id: parked, token_sha256: "${'a'.repeat(64)}", scopes: [] }, { id: live, token_sha256: "${'b'.repeat(64)}", scopes: [chat] }]
  users: [{ username: nobody, password_scrypt: "${await hashPassword('pw')}", scopes: [] }]
${MODEL}`
    const run = await cli(['check', '--config', await file('no-scopes.yaml', text)])
    expect(run.code).toBe(0)
    expect(run.stdout.split('\n').filter((line) => line.startsWith('warning:'))).toEqual([
      'warning: auth.keys.0.scopes: key "parked" has no scopes, so every request with it is refused (403)',
      'warning: auth.users.0.scopes: user "nobody" has no scopes, so every request with it is refused (403)',
    ])
  })

  // Regression (ops review, session 26): an empty bearer or username is refused, but a password set from an
  // empty variable passed check without a word and the upstream got `user:`.
  it('check warns of an empty Basic password for an upstream (allowed: a username alone may be the credential), and still exits 0', async () => {
    const text = `${MODEL}
upstreams:
  objects: { url: "http://127.0.0.1:9", auth: { basic: { username: api, password: "\${OBJ_PASSWORD}" } } }
  training: { url: "http://127.0.0.1:9", auth: { basic: { username: api, password: set } } }
`
    const run = await cli(['check', '--config', await file('empty-password.yaml', text)], { OBJ_PASSWORD: '' })
    expect(run.code).toBe(0)
    expect(run.stdout.split('\n').filter((line) => line.startsWith('warning:'))).toEqual([
      'warning: upstreams.objects.auth.basic.password: is empty, so the objects upstream gets a username and no password (a variable set but empty gives this; leave it only for an upstream that takes a username alone)',
    ])
  })

  it('check exits 1 for invalid YAML, naming the file on stderr', async () => {
    const run = await cli(['check', '--config', await file('broken.yaml', 'server: [\n')])
    expect(run.code).toBe(1)
    expect(run.stdout).toMatch(/^\(root\): YAML: /)
    expect(run.stderr).toMatch(/broken\.yaml: invalid configuration, \d+ problem\(s\):/)
  })

  it('check exits 1 for a file that does not exist', async () => {
    const run = await cli(['check', '--config', join(dir, 'nope.yaml')])
    expect(run.code).toBe(1)
    expect(run.stderr).toContain('nope.yaml')
    // Listed as a problem like any other, on stdout (a review found it only on stderr).
    expect(run.stdout).toMatch(/^\(root\): cannot read file: ENOENT/)
  })

  // Regression (config review): read loosely, a Latin-1 `ä` in a password became U+FFFD and passed `check`;
  // the upstream refused every request with the password the gateway sent instead.
  it('check and loadConfigFile refuse a file that is not UTF-8, saying where', async () => {
    const latin1 = Buffer.concat([Buffer.from(`${MODEL}upstreams:\n  objects: { url: "http://127.0.0.1:9", auth: { basic: { username: api, password: "p`), Buffer.from([0xe4]), Buffer.from('ss" } } }\n')])
    const path = join(dir, 'latin1.yaml')
    await writeFile(path, latin1)
    const line = latin1.subarray(0, latin1.indexOf(0xe4)).toString('latin1').split('\n').length

    const run = await cli(['check', '--config', path])
    expect(run.code).toBe(1)
    expect(run.stdout.trim()).toBe(`(root): the file is not valid UTF-8 (line ${line}, byte offset ${latin1.indexOf(0xe4)}); save it as UTF-8`)
    await expect(loadConfigFile(path, {})).rejects.toThrow(/not valid UTF-8/)
  })

  it('a UTF-8 file with a byte order mark or characters beyond ASCII is read as written', async () => {
    const path = await file('utf8.yaml', `\ufeff${MODEL}upstreams:\n  objects: { url: "http://127.0.0.1:9", auth: { basic: { username: api, password: "päss€" } } }\n`)
    const config = await loadConfigFile(path, {})
    expect(config.upstreams.objects?.auth).toEqual({ basic: { username: 'api', password: 'päss€' } })
  })

  it('check exits 0 for config/gateway.yaml, whose variables all have defaults', async () => {
    const run = await cli(['check', '--config', 'config/gateway.yaml'])
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/config\/gateway\.yaml: ok/)
  })

  // The README calls it a commented example of every key: a key added to the schema must be added there too.
  it('config/gateway.yaml names every key the schema accepts (set or in a comment)', async () => {
    const text = await readFile(join(ROOT, 'config/gateway.yaml'), 'utf8')
    const missing = [...keyNamesOf(GatewayConfigSchema)].filter((name) => !new RegExp(`(^|[\\s{,#])${name}:`, 'm').test(text))
    expect(missing).toEqual([])
  })

  it('check takes the file from SLUICE_CONFIG too', async () => {
    const path = await file('via-env.yaml', 'server: { bogus: 1 }\n' + MODEL)
    const run = await cli(['check'], { SLUICE_CONFIG: path })
    expect(run.code).toBe(1)
    expect(run.stdout.trim()).toBe('server.bogus: is not a known key')
  })
})

describe('parseConfig: password_scrypt cost', () => {
  const user = (hash: string) => `${MODEL}auth:\n  users:\n    - { username: alice, password_scrypt: "${hash}", scopes: [objects] }\n`
  const salt = Buffer.alloc(16, 1).toString('base64')
  const hash = Buffer.alloc(64, 2).toString('base64')

  it.each([
    ['N=2^20, r=8 (1 GiB a try)', 1048576, 8, 1],
    ['N=2^14, r=8, p=64', 16384, 8, 64],
    ['N=2^30, r=1', 2 ** 30, 1, 1],
  ])('refuses %s: every Basic attempt, an unknown user’s too, would pay it', (_name, N, r, p) => {
    const found = issues(user(`scrypt$${N}$${r}$${p}$${salt}$${hash}`))
    expect(paths(found)).toEqual(['auth.users.0.password_scrypt'])
    expect(found[0]!.message).toContain('N·r·p must be at most')
  })

  // Regression (config review): within the cost bound, but past OpenSSL's N < 2^(16·r): `check` passed it
  // and every Basic request, an unknown user's too, was a 500 ("Invalid scrypt params").
  it.each([
    [65536, 1],
    [131072, 1],
  ])('refuses N=%i with r=%i, which Node cannot derive', async (N, r) => {
    const found = issues(user(`scrypt$${N}$${r}$1$${salt}$${hash}`))
    expect(found).toEqual([{ path: 'auth.users.0.password_scrypt', message: expect.stringContaining('N must be below 2^(16·r)') }])
    await expect(deriveScrypt('pw', Buffer.alloc(16), { N, r, p: 1 }, 64)).rejects.toThrow()
    // The largest N it allows there derives.
    expect((await deriveScrypt('pw', Buffer.alloc(16), { N: 32768, r, p: 1 }, 64)).length).toBe(64)
  })

  // Regression: the schema's pattern and the hash parser both said so, and `check` printed the line twice.
  it('a hash of the wrong form is reported once', () => {
    expect(issues(user('nonsense'))).toEqual([{ path: 'auth.users.0.password_scrypt', message: expect.stringContaining('scrypt$N$r$p$salt$hash') }])
  })

  it.each([
    ['hash-password’s own (N=2^14, r=8, p=1)', 16384, 8, 1],
    ['OWASP’s first choice (N=2^17, r=8, p=1)', 131072, 8, 1],
  ])('accepts %s', (_name, N, r, p) => {
    expect(ok(user(`scrypt$${N}$${r}$${p}$${salt}$${hash}`)).auth.users[0]!.username).toBe('alice')
  })
})

/** Every property name anywhere in a JSON schema (objects, arrays, unions). */
function keyNamesOf(schema: unknown, names = new Set<string>()): Set<string> {
  if (schema === null || typeof schema !== 'object') return names
  const node = schema as { properties?: Record<string, unknown>; items?: unknown; anyOf?: unknown[] }
  for (const [name, child] of Object.entries(node.properties ?? {})) {
    names.add(name)
    keyNamesOf(child, names)
  }
  keyNamesOf(node.items, names)
  for (const option of node.anyOf ?? []) keyNamesOf(option, names)
  return names
}
