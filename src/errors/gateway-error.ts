/**
 * Every error the gateway itself produces is defined once here, with its
 * HTTP status and DESIGN.md `type`. Handlers throw `GatewayError`; the one
 * error handler (error-handler.ts) turns it into the wire body.
 */

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'overloaded_error'
  | 'service_unavailable'
  | 'upstream_error'
  | 'upstream_timeout'
  | 'internal_error'

interface ErrorKind {
  readonly status: number
  readonly type: ErrorType
}

/** Stable codes (the `code` member of the error body) and what they mean on the wire. */
export const ERROR_KINDS = {
  invalid_json: { status: 400, type: 'invalid_request_error' },
  invalid_value: { status: 400, type: 'invalid_request_error' },
  missing_field: { status: 400, type: 'invalid_request_error' },
  conflicting_fields: { status: 400, type: 'invalid_request_error' },
  model_not_found: { status: 400, type: 'invalid_request_error' },
  invalid_request_id: { status: 400, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  body_too_large: { status: 413, type: 'invalid_request_error' },
  invalid_url: { status: 400, type: 'invalid_request_error' },
  uri_too_long: { status: 414, type: 'invalid_request_error' },
  malformed_http: { status: 400, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  headers_too_large: { status: 431, type: 'invalid_request_error' },
  expectation_failed: { status: 417, type: 'invalid_request_error' },
  missing_credentials: { status: 401, type: 'authentication_error' },
  invalid_credentials: { status: 401, type: 'authentication_error' },
  wrong_auth_scheme: { status: 401, type: 'authentication_error' },
  insufficient_scope: { status: 403, type: 'permission_error' },
  priority_forbidden: { status: 403, type: 'permission_error' },
  rate_limit_requests: { status: 429, type: 'rate_limit_error' },
  rate_limit_tokens: { status: 429, type: 'rate_limit_error' },
  concurrency: { status: 429, type: 'rate_limit_error' },
  queue_full: { status: 429, type: 'rate_limit_error' },
  credential_checks_busy: { status: 429, type: 'rate_limit_error' },
  queue_timeout: { status: 503, type: 'overloaded_error' },
  not_found: { status: 404, type: 'not_found_error' },
  no_healthy_backend: { status: 503, type: 'service_unavailable' },
  not_ready: { status: 503, type: 'service_unavailable' },
  shutting_down: { status: 503, type: 'service_unavailable' },
  upstream_unreachable: { status: 502, type: 'upstream_error' },
  upstream_bad_response: { status: 502, type: 'upstream_error' },
  upstream_timeout: { status: 504, type: 'upstream_timeout' },
  internal_error: { status: 500, type: 'internal_error' },
} as const satisfies Record<string, ErrorKind>

export type ErrorCode = keyof typeof ERROR_KINDS

export interface ErrorBody {
  error: { message: string; type: ErrorType; param: string | null; code: string | null }
}

export class GatewayError extends Error {
  readonly code: ErrorCode
  readonly status: number
  readonly type: ErrorType
  readonly param: string | null
  /** Extra response headers (WWW-Authenticate, Retry-After). */
  readonly headers: Readonly<Record<string, string>>

  constructor(
    code: ErrorCode,
    message: string,
    options: { param?: string | null; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause })
    this.name = 'GatewayError'
    this.code = code
    this.status = ERROR_KINDS[code].status
    this.type = ERROR_KINDS[code].type
    this.param = options.param ?? null
    this.headers = options.headers ?? {}
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } }
  }
}
