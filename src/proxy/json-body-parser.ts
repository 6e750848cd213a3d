/**
 * JSON bodies are parsed once and their exact bytes kept, because a valid
 * training-job or object-read body is forwarded as received (DESIGN.md),
 * not re-serialized. `__proto__` and `constructor.prototype` keys are refused
 * (secure-json-parse), as fastify's own parser does.
 */
import type { FastifyInstance } from 'fastify'
import secureJson from 'secure-json-parse'

declare module 'fastify' {
  interface FastifyRequest {
    rawBody: Buffer | null
  }
}

export class InvalidJsonError extends SyntaxError {
  readonly code = 'FST_ERR_CTP_INVALID_JSON_BODY'
  readonly statusCode = 400
}

export function registerJsonBodyParser(app: FastifyInstance): void {
  app.decorateRequest('rawBody', null)
  // Only JSON is accepted: any other content type (text/plain included) is 415.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const raw = body as Buffer
    request.rawBody = raw
    if (raw.length === 0) {
      done(new InvalidJsonError('the body is empty'), undefined)
      return
    }
    try {
      done(null, secureJson.parse(raw.toString('utf8'), undefined, { protoAction: 'error', constructorAction: 'error' }))
    } catch (error) {
      done(new InvalidJsonError((error as Error).message), undefined)
    }
  })
}
