/**
 * What of a Redis URL, and of the errors its connection raises, may reach a
 * log line. A password can sit in the userinfo (`redis://:pw@host`) or in the
 * query (`?password=pw`, which ioredis reads too); Redis repeats it in some
 * replies (`ERR AUTH <password> called without any password configured`),
 * and ioredis hangs the AUTH command, arguments and all, on its errors.
 */

/** Scheme, host, port and database: never the userinfo or the query. */
export function redactedRedisUrl(url: string): string {
  try {
    const parsed = new URL(url)
    const userinfo = parsed.username !== '' || parsed.password !== '' ? '***@' : ''
    return `${parsed.protocol}//${userinfo}${parsed.host}${parsed.pathname}`
  } catch {
    return 'redis'
  }
}

/** The passwords a Redis URL carries, to scrub from error text: the userinfo's as written and decoded, the query's (decoded already). */
export function redisUrlSecrets(url: string): string[] {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return []
  }
  const secrets = [parsed.password, safeDecode(parsed.password), ...parsed.searchParams.getAll('password')]
  return [...new Set(secrets)].filter((secret) => secret !== '')
}

export interface LoggableError {
  readonly type: string
  readonly message: string
  readonly code?: string
}

/** Name, code and message with every secret replaced by `***`; never the error object itself. */
export function loggableRedisError(error: unknown, secrets: readonly string[]): LoggableError {
  const { name, message, code } = error instanceof Error ? (error as Error & { code?: unknown }) : { name: 'Error', message: String(error), code: undefined }
  return { type: name, message: scrubbed(message, secrets), ...(typeof code === 'string' ? { code } : {}) }
}

function scrubbed(text: string, secrets: readonly string[]): string {
  let out = text
  for (const secret of secrets) out = out.split(secret).join('***')
  return out
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}
