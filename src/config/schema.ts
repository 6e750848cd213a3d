/**
 * The configuration file's shape (DESIGN.md "Configuration"), with defaults.
 * Every object is closed (`additionalProperties: false`) so a typo is an error,
 * not a silently ignored key.
 */
import { Type, type Static, type TSchema } from 'typebox'
import { stringEnum } from '../schemas/json-schema.js'

const closed = { additionalProperties: false } as const

export const DEFAULT_PORT = 8080

/** An object whose members all have defaults: absent means "all defaults". */
function defaulted<T extends TSchema>(schema: T): T {
  return Type.Unsafe<Static<T>>({ ...schema, default: {} }) as unknown as T
}

const HttpUrl = Type.String({ pattern: '^https?://[^\\s/]+', description: 'an http:// or https:// URL' })
const Sha256Hex = Type.String({ pattern: '^[0-9a-fA-F]{64}$', description: '64 hex characters' })

/**
 * A duration in milliseconds. Node's timers hold at most 2^31 − 1 ms (about
 * 24.8 days) and turn anything longer into 1 ms, with a warning on stderr:
 * a "never time out" value would time out at once, so it is refused here.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1
function Milliseconds(options: { default?: number; minimum: number }) {
  return Type.Integer({ ...options, maximum: MAX_TIMER_MS })
}

/**
 * How long an idle pooled connection is kept for reuse. It must be shorter
 * than the server's own idle timeout (uvicorn, under vLLM and FastAPI,
 * closes after 5 s and does not announce it), or a request can be written
 * just as the server closes and fail with a reset: seen as occasional 502s
 * with undici's 30 s. The default is undici's own.
 */
const KeepAliveMs = Milliseconds({ default: 4000, minimum: 1 })

export const SCOPES = ['chat', 'training', 'checkpoints', 'objects'] as const
export const BEARER_SCOPES = ['chat', 'training', 'checkpoints'] as const
export type Scope = (typeof SCOPES)[number]

export const DEFAULT_BODY_LIMIT_BYTES = 8 * 1024 * 1024
export const DEFAULT_QUEUED_BODY_LIMIT_BYTES = 256 * 1024 * 1024

export const ServerConfig = Type.Object(
  {
    host: Type.String({ default: '127.0.0.1', minLength: 1 }),
    port: Type.Integer({ default: DEFAULT_PORT, minimum: 0, maximum: 65535 }),
    body_limit_bytes: Type.Integer({ default: DEFAULT_BODY_LIMIT_BYTES, minimum: 1024 }),
    // The bodies of requests waiting for a slot, all models together (scheduling/queued-bodies.ts).
    queued_body_limit_bytes: Type.Integer({ default: DEFAULT_QUEUED_BODY_LIMIT_BYTES, minimum: 1024 }),
    // The largest chat answer read whole (not streamed) before it is sent on: it is held in memory.
    answer_limit_bytes: Type.Integer({ default: 64 * 1024 * 1024, minimum: 1024 }),
    shutdown_grace_ms: Milliseconds({ default: 30000, minimum: 0 }),
    // When set, /metrics is served on this port only (same host), off the public listener.
    metrics_port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
    // Client connections open at once on the public listener; past it a new one is closed as it is accepted. 0: no cap.
    max_connections: Type.Integer({ default: 0, minimum: 0 }),
  },
  closed,
)

export const StateConfig = Type.Object(
  {
    kind: stringEnum(['memory', 'redis'] as const, { default: 'memory' }),
    redis_url: Type.Optional(Type.String({ pattern: '^rediss?://' })),
    // No braces: one in the prefix would become the hash tag of every key, in place of the model's and the API key's.
    key_prefix: Type.String({ default: 'sluice:', pattern: '^[^{}]*$', description: 'a prefix without "{" or "}" (the keys carry their own hash tags)' }),
  },
  closed,
)

export const KeyLimits = Type.Object(
  {
    requests_per_minute: Type.Optional(Type.Integer({ minimum: 1 })),
    tokens_per_minute: Type.Optional(Type.Integer({ minimum: 1 })),
    max_concurrency: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  closed,
)

export const ApiKeyConfig = Type.Object(
  {
    id: Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$', description: 'letters, digits, . _ -' }),
    token_sha256: Sha256Hex,
    scopes: Type.Array(stringEnum(BEARER_SCOPES), { uniqueItems: true }),
    min_priority: Type.Optional(Type.Integer()),
    limits: Type.Optional(KeyLimits),
  },
  closed,
)

export const UserConfig = Type.Object(
  {
    username: Type.String({ minLength: 1, pattern: '^[^:]+$', description: 'a name without a colon' }),
    password_scrypt: Type.String({
      pattern: '^scrypt\\$\\d+\\$\\d+\\$\\d+\\$[A-Za-z0-9+/]+={0,2}\\$[A-Za-z0-9+/]+={0,2}$',
      description: 'scrypt$N$r$p$salt$hash',
    }),
    scopes: Type.Array(stringEnum(['objects'] as const), { uniqueItems: true }),
  },
  closed,
)

export const AuthConfig = Type.Object(
  {
    keys: Type.Array(ApiKeyConfig, { default: [] }),
    users: Type.Array(UserConfig, { default: [] }),
  },
  closed,
)

export const BackendConfig = Type.Object(
  {
    url: HttpUrl,
    name: Type.Optional(Type.String({ minLength: 1 })),
    weight: Type.Integer({ default: 1, minimum: 1 }),
    api_key: Type.Optional(Type.String()),
  },
  closed,
)

export const BALANCERS = ['round_robin', 'least_loaded', 'prefix_affinity'] as const

export const ModelConfig = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    served_name: Type.Optional(Type.String({ minLength: 1 })),
    priority_scheduling: Type.Boolean({ default: false }),
    balance: stringEnum(BALANCERS, { default: 'round_robin' }),
    max_concurrency_per_backend: Type.Integer({ default: 64, minimum: 1 }),
    queue: defaulted(
      Type.Object(
        {
          max_size: Type.Integer({ default: 1000, minimum: 0 }),
          max_wait_ms: Milliseconds({ default: 30000, minimum: 0 }),
        },
        closed,
      ),
    ),
    retries: Type.Integer({ default: 1, minimum: 0 }),
    timeouts: defaulted(
      Type.Object(
        {
          connect_ms: Milliseconds({ default: 2000, minimum: 1 }),
          first_byte_ms: Milliseconds({ default: 120000, minimum: 1 }),
          // Longest silence between two chunks of an answer once it started.
          idle_ms: Milliseconds({ default: 60000, minimum: 1 }),
          keep_alive_ms: KeepAliveMs,
        },
        closed,
      ),
    ),
    health: defaulted(
      Type.Object(
        {
          // undici refuses a path with a space or a control character: the backend was never found healthy.
          path: Type.String({ default: '/health', pattern: '^/[!-~]*$', description: 'a path starting with "/", in printable ASCII (percent-encode spaces and other characters)' }),
          interval_ms: Milliseconds({ default: 5000, minimum: 100 }),
          unhealthy_after: Type.Integer({ default: 3, minimum: 1 }),
        },
        closed,
      ),
    ),
    backends: Type.Array(BackendConfig, { minItems: 1 }),
  },
  closed,
)

const UpstreamAuth = Type.Union([
  Type.Object({ bearer: Type.String({ minLength: 1 }) }, closed),
  Type.Object(
    { basic: Type.Object({ username: Type.String({ minLength: 1 }), password: Type.String() }, closed) },
    closed,
  ),
  Type.Object({ forward_client: Type.Literal(true) }, closed),
], { description: 'must be one of { bearer: TOKEN }, { basic: { username, password } }, { forward_client: true }' })

export const UpstreamConfig = Type.Object(
  {
    url: HttpUrl,
    auth: Type.Optional(UpstreamAuth),
    timeouts: defaulted(
      Type.Object(
        {
          connect_ms: Milliseconds({ default: 2000, minimum: 1 }),
          first_byte_ms: Milliseconds({ default: 60000, minimum: 1 }),
          keep_alive_ms: KeepAliveMs,
          // How long a client may show no progress reading a piped answer (stalled-reader.ts).
          client_idle_ms: Milliseconds({ default: 300000, minimum: 1 }),
        },
        closed,
      ),
    ),
  },
  closed,
)

export const UPSTREAM_NAMES = ['training', 'checkpoints', 'objects'] as const
export type UpstreamName = (typeof UPSTREAM_NAMES)[number]

export const GatewayConfigSchema = Type.Object(
  {
    server: defaulted(ServerConfig),
    state: defaulted(StateConfig),
    auth: defaulted(AuthConfig),
    models: Type.Array(ModelConfig, { minItems: 1 }),
    default_model: Type.Optional(Type.String({ minLength: 1 })),
    upstreams: defaulted(
      Type.Object(
        {
          training: Type.Optional(UpstreamConfig),
          checkpoints: Type.Optional(UpstreamConfig),
          objects: Type.Optional(UpstreamConfig),
        },
        closed,
      ),
    ),
    log: defaulted(
      Type.Object(
        {
          level: stringEnum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, {
            default: 'info',
          }),
        },
        closed,
      ),
    ),
  },
  closed,
)

/** The file as validated, defaults applied. */
export type RawGatewayConfig = Static<typeof GatewayConfigSchema>
export type RawModelConfig = Static<typeof ModelConfig>
export type RawBackendConfig = Static<typeof BackendConfig>
export type ApiKey = Static<typeof ApiKeyConfig>
export type User = Static<typeof UserConfig>
export type UpstreamSettings = Static<typeof UpstreamConfig>
export type UpstreamAuthSettings = Static<typeof UpstreamAuth>
export type KeyLimitSettings = Static<typeof KeyLimits>
