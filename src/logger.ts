/**
 * The gateway's pino logger. Redaction is defence in depth: no code path logs
 * headers or bodies, but if one ever does, credentials come out censored.
 */
import { pino, type DestinationStream, type Logger } from 'pino'

export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["proxy-authorization"]',
  'headers.authorization',
  'headers.cookie',
  'headers["proxy-authorization"]',
  'authorization',
  'api_key',
  'password',
  'token',
]

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' }, base: { service: 'sluice' } }
  return destination === undefined ? pino(options) : pino(options, destination)
}
