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

const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: false, strictNumbers: true, verbose: true })
addFormats.default(ajv, ['uuid', 'date-time'])
/**
 * ISO 8601 date-time as Python's `datetime.isoformat()` writes it: the
 * timezone is optional (RFC 3339's `date-time` requires one), and the value
 * must be a real instant.
 */
ajv.addFormat('iso-date-time', {
  type: 'string',
  validate: (text: string) =>
    /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|z|[+-]\d{2}(:?\d{2})?)?$/.test(text) &&
    !Number.isNaN(Date.parse(text.replace(' ', 'T').replace(/(\.\d{3})\d+/, '$1'))),
})

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
