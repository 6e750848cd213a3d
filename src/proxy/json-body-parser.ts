/**
 * JSON bodies are parsed once and their exact bytes kept, because a valid
 * training-job or object-read body is forwarded as received (DESIGN.md),
 * not re-serialized. Refused with 400 before any route sees them: bytes
 * that are not UTF-8 (RFC 8259 §8.1; decoding would repair them, so what was
 * checked would differ from what is forwarded), `__proto__` and
 * `constructor.prototype` keys (fastify's own parser, secure-json-parse,
 * refuses them too; named in the refusal's `param`), nesting deeper than MAX_DEPTH, more
 * objects and arrays or more distinct object layouts than the body size
 * limit allows, and numbers beyond the double range.
 * A body with a Content-Encoding other than identity is 415 (RFC 9110
 * §8.4.1): the gateway does not decompress, and a mislabelled plain body
 * would reach an upstream without the label it was sent with. So is a
 * transfer coding besides chunked, and a charset other than UTF-8.
 */
import { isUtf8 } from 'node:buffer'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { GatewayError } from '../errors/gateway-error.js'
import { BYTES_PER_CONTAINER, firstNonFiniteNumber, jsonShape, MAX_DEPTH, type JsonShape } from '../json/json-limits.js'
import { BYTES_PER_LAYOUT, countObjectLayouts } from '../json/object-layouts.js'
import { prototypeKeyPath } from '../json/prototype-keys.js'
import { readBody } from './body-reader.js'
import { holdsOnly, isIdentityCoding } from './content-coding.js'
import { markCutOffable, type CutOffable } from './in-flight-requests.js'

declare module 'fastify' {
  interface FastifyRequest {
    rawBody: Buffer | null
  }
}

const BYTE_ORDER_MARK = 0xfeff

export class InvalidJsonError extends SyntaxError {
  readonly code = 'FST_ERR_CTP_INVALID_JSON_BODY'
  readonly statusCode = 400
}

/** `limit`: server.body_limit_bytes. */
export function registerJsonBodyParser(app: FastifyInstance, limit: number): void {
  app.decorateRequest('rawBody', null)
  // Only JSON is accepted: any other content type (text/plain included) is 415.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', (request, payload, done) => {
    // Before the body is read: it would not be used.
    const refusal = codingRefusal(request.headers)
    if (refusal !== null) {
      done(refusal, undefined)
      return
    }
    // Until the body is read, a shutdown's cut-off ends the read: the client gets its 503, not a closed connection.
    const reading: CutOffable = { cutOff: () => undefined }
    markCutOffable(request.raw, reading)
    reading.cutOff = readBody(payload, request.headers['content-length'], limit, (error, body) => {
      markCutOffable(request.raw, undefined)
      if (error === null) parseBody(request, body!, limit, done)
      else done(error, undefined)
    })
  })
}

/** The body read whole: checked, parsed, and kept as its bytes. */
function parseBody(request: FastifyRequest, raw: Buffer, limit: number, done: (error: Error | null, body?: unknown) => void): void {
  request.rawBody = raw
  if (raw.length === 0) return done(new InvalidJsonError('the body is empty'), undefined)
  if (!isUtf8(raw)) return done(new InvalidJsonError('it is not valid UTF-8'), undefined)
  const shape = jsonShape(raw)
  // Valid JSON, past what the gateway parses: said so, under the code the README has always given it.
  if (shape.depth > MAX_DEPTH) return done(new GatewayError('invalid_json', `The body nests objects and arrays deeper than ${MAX_DEPTH} levels, more than this gateway parses: nest less deeply.`), undefined)
  // Before the parse, whose cost they bound.
  const maxContainers = Math.floor(limit / BYTES_PER_CONTAINER)
  if (shape.containers > maxContainers) {
    const why = `The body holds ${shape.containers} objects and arrays, more than the ${maxContainers} this gateway parses (one per ${BYTES_PER_CONTAINER} bytes of server.body_limit_bytes).`
    return done(new GatewayError('invalid_value', why), undefined)
  }
  const maxLayouts = Math.floor(limit / BYTES_PER_LAYOUT)
  if (countObjectLayouts(raw, maxLayouts) > maxLayouts) {
    const why = `The body's objects have more than ${maxLayouts} distinct layouts (member names in order), the most this gateway parses (one per ${BYTES_PER_LAYOUT} bytes of server.body_limit_bytes).`
    return done(new GatewayError('invalid_value', why), undefined)
  }
  let text = raw.toString('utf8')
  // RFC 8259 §8.1: a parser may ignore a byte order mark (JSON.parse does not).
  if (text.charCodeAt(0) === BYTE_ORDER_MARK) text = text.slice(1)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    return done(new InvalidJsonError((error as Error).message), undefined)
  }
  const refusal = refusalOfValue(parsed, shape)
  if (refusal !== null) return done(refusal, undefined)
  done(null, parsed)
}

/**
 * A key or number the parsed body may not hold, as its refusal, or null.
 * Only looked for where the scan saw one may be. JSON.parse makes such keys
 * own properties, polluting nothing here; JavaScript services upstream that
 * merge objects would be polluted.
 */
function refusalOfValue(parsed: unknown, shape: JsonShape): GatewayError | null {
  const key = shape.mayHoldPrototypeKey ? prototypeKeyPath(parsed) : null
  if (key !== null) {
    const why = `${key} is a key this gateway refuses (__proto__, or constructor holding prototype, would pollute prototypes in JavaScript services): rename it.`
    return new GatewayError('invalid_value', why, { param: key })
  }
  const huge = shape.mayHoldHugeNumber ? firstNonFiniteNumber(parsed) : null
  if (huge === null) return null
  const param = huge === '' ? null : huge
  return new GatewayError('invalid_value', `${param ?? 'The body'} is a number beyond the double range (±1.8e308).`, { param })
}

/** Charsets whose bytes UTF-8 reads as they were meant: UTF-8 itself, and ASCII (RFC 8259 gives JSON no charset parameter at all). */
const READ_AS_UTF8 = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii'])

/**
 * A body the gateway cannot read as sent, as its 415: a Content-Encoding
 * other than identity; a transfer coding besides `chunked` (Node's parser
 * takes `gzip, chunked` as chunked and hands on the still-compressed bytes);
 * a charset other than UTF-8 or ASCII (RFC 8259 §8.1: JSON between
 * systems is UTF-8; a UTF-16 body read as UTF-8 was refused as a JSON
 * syntax error).
 */
function codingRefusal(headers: FastifyRequest['headers']): GatewayError | null {
  const encoding = headers['content-encoding']
  if (!isIdentityCoding(encoding)) {
    return new GatewayError('unsupported_media_type', `Content-Encoding "${encoding}" is not supported: send the body uncompressed.`)
  }
  const transfer = headers['transfer-encoding']
  if (transfer !== undefined && !holdsOnly(transfer, 'chunked')) {
    return new GatewayError('unsupported_media_type', `Transfer-Encoding "${transfer}" is not supported: send the body uncompressed, chunked or with a Content-Length.`)
  }
  const charset = charsetOf(headers['content-type'])
  if (charset !== null && !READ_AS_UTF8.has(charset)) {
    return new GatewayError('unsupported_media_type', `Content-Type charset "${charset}" is not supported: send the body as UTF-8 JSON.`)
  }
  return null
}

/** The lowercased \`charset\` parameter of a media type (quotes removed), or null; \`application/json\` alone costs one length check. */
function charsetOf(contentType: string | undefined): string | null {
  if (contentType === undefined || contentType.length <= 'application/json'.length) return null
  const match = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(contentType)
  return match === null ? null : match[1]!.toLowerCase()
}
