/**
 * Compiles a request body schema into a check that returns the first problem
 * as a gateway error naming the field (`param`), or the typed body. No
 * coercion and no defaults: what the client sent is what is checked and
 * what is forwarded.
 */
import { Ajv } from 'ajv'
import addFormats from 'ajv-formats'
import type { Static, TSchema } from 'typebox'
import { GatewayError } from '../errors/gateway-error.js'
import { toIssues } from './validation-issue.js'
import { isIsoDateTime } from './iso-date-time.js'

const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: false, strictNumbers: true, verbose: true })
addFormats.default(ajv, ['uuid', 'date-time'])
// ISO 8601 as the training upstream writes it (see iso-date-time.ts).
ajv.addFormat('iso-date-time', { type: 'string', validate: isIsoDateTime })

export type BodyCheck<T> = (body: unknown) => T

export function compileBodyCheck<S extends TSchema>(schema: S): BodyCheck<Static<S>> {
  const validate = ajv.compile(schema)
  return (body: unknown) => {
    if (validate(body)) return body as Static<S>
    const issue = toIssues(validate.errors)[0]
    if (issue === undefined || issue.path === '') {
      throw new GatewayError('invalid_value', `The body ${issue?.message ?? 'is invalid'}.`)
    }
    const code = issue.message === 'is required' ? 'missing_field' : 'invalid_value'
    throw new GatewayError(code, `${issue.path} ${issue.message}.`, { param: issue.path })
  }
}
