import { describe, it, expect } from 'vitest'
import { Ajv, type ErrorObject } from 'ajv'
import addFormats from 'ajv-formats'
import { formatIssue, pointerToPath, toIssues } from '../../src/schemas/validation-issue.js'

const ajv = new Ajv({ allErrors: true, strict: false, verbose: true })
addFormats.default(ajv, ['uuid'])

function issuesFor(schema: object, data: unknown) {
  const validate = ajv.compile(schema)
  expect(validate(data)).toBe(false)
  return toIssues(validate.errors)
}

describe('pointerToPath', () => {
  it.each([
    ['', ''],
    ['/a', 'a'],
    ['/tools/0/type', 'tools.0.type'],
    ['/a~1b/c', 'a/b.c'],
    ['/a~0b', 'a~b'],
    ['/~01', '~1'],
  ])('%j becomes %j', (pointer, path) => {
    expect(pointerToPath(pointer)).toBe(path)
  })
})

describe('toIssues', () => {
  it('returns nothing for no errors', () => {
    expect(toIssues(null)).toEqual([])
    expect(toIssues(undefined)).toEqual([])
    expect(toIssues([])).toEqual([])
  })

  it('names a missing member by its full path', () => {
    const schema = { type: 'object', properties: { a: { type: 'object', required: ['b'] } } }
    expect(issuesFor(schema, { a: {} })).toEqual([{ path: 'a.b', message: 'is required' }])
  })

  it('names a missing member of the document itself without a leading dot', () => {
    expect(issuesFor({ type: 'object', required: ['messages'] }, {})).toEqual([{ path: 'messages', message: 'is required' }])
  })

  it('names an unknown key by its full path', () => {
    const schema = { type: 'object', properties: { server: { type: 'object', additionalProperties: false } } }
    expect(issuesFor(schema, { server: { bogus: 1 } })).toEqual([{ path: 'server.bogus', message: 'is not a known key' }])
  })

  it('names the known key an unknown one was most likely meant to be', () => {
    const schema = { type: 'object', properties: { port: { type: 'integer' }, host: { type: 'string' } }, additionalProperties: false }
    expect(issuesFor(schema, { prot: 1 })).toEqual([{ path: 'prot', message: 'is not a known key (did you mean "port"?)' }])
  })

  it.each([
    [{ type: 'integer' }, 'must be an integer (got an object)'],
    [{ type: 'string' }, 'must be a string (got an object)'],
    [{ type: 'object' }, 'must be an object (got a string)'],
    [{ type: 'array' }, 'must be an array (got an object)'],
    [{ type: ['integer', 'null'] }, 'must be an integer or null (got an object)'],
    [{ type: ['boolean', 'null'] }, 'must be a boolean or null (got an object)'],
  ])('describes a type error of %j', (member, message) => {
    const schema = { type: 'object', properties: { x: member } }
    const data = { x: member.type === 'object' ? 'str' : { not: 'this' } }
    expect(issuesFor(schema, data)).toEqual([{ path: 'x', message }])
  })

  // What was given is told by its kind, never its value: a YAML password may read as a number.
  it.each([
    [{ type: 'string' }, 12345678, 'must be a string (got a number)'],
    [{ type: 'integer' }, 1.5, 'must be an integer (got a fractional number)'],
    [{ type: 'integer' }, '8080', 'must be an integer (got a string)'],
    [{ type: 'string' }, null, 'must be a string (got null)'],
    [{ type: 'object' }, [1], 'must be an object (got an array)'],
    [{ type: 'array' }, true, 'must be an array (got a boolean)'],
  ])('tells the kind given to a %j, not the value: %j', (member, value, message) => {
    const schema = { type: 'object', properties: { x: member } }
    const issues = issuesFor(schema, { x: value })
    expect(issues).toEqual([{ path: 'x', message }])
    if (typeof value === 'number' || typeof value === 'string') expect(issues[0]!.message).not.toContain(String(value))
  })

  it('lists the allowed values of an enum', () => {
    const schema = { type: 'object', properties: { effort: { enum: ['low', 'high', null] } } }
    expect(issuesFor(schema, { effort: 'extreme' })).toEqual([{ path: 'effort', message: 'must be one of: low, high, null' }])
  })

  it('shows the one allowed value of a const', () => {
    expect(issuesFor({ type: 'object', properties: { t: { const: 'function' } } }, { t: 'fn' })).toEqual([
      { path: 't', message: 'must be function' },
    ])
    expect(issuesFor({ type: 'object', properties: { t: { const: true } } }, { t: false })).toEqual([{ path: 't', message: 'must be true' }])
  })

  it("uses a pattern's description when it has one, else the pattern", () => {
    const described = { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$', description: 'lower-case letters' } } }
    expect(issuesFor(described, { id: 'A1' })).toEqual([{ path: 'id', message: 'must be lower-case letters' }])
    const bare = { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+$' } } }
    expect(issuesFor(bare, { id: 'A1' })).toEqual([{ path: 'id', message: 'must be a string matching ^[a-z]+$' }])
  })

  it('names the expected format', () => {
    const schema = { type: 'object', properties: { model_id: { type: 'string', format: 'uuid' } } }
    expect(issuesFor(schema, { model_id: 'nope' })).toEqual([{ path: 'model_id', message: 'must be a valid uuid' }])
  })

  it('keeps the message of other keywords, at their path', () => {
    const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 1 } } }
    expect(issuesFor(schema, { n: 0 })).toEqual([{ path: 'n', message: 'must be >= 1' }])
  })

  it('reports a failed anyOf once, with its description, dropping the errors of its branches', () => {
    const schema = {
      type: 'object',
      properties: {
        auth: {
          description: 'must be { bearer } or { basic }',
          anyOf: [
            { type: 'object', required: ['bearer'], additionalProperties: false, properties: { bearer: { type: 'string' } } },
            { type: 'object', required: ['basic'], additionalProperties: false, properties: { basic: { type: 'object' } } },
          ],
        },
      },
    }
    expect(issuesFor(schema, { auth: { token: 1 } })).toEqual([{ path: 'auth', message: 'must be { bearer } or { basic }' }])
  })

  it('reports a failed anyOf without a description generically', () => {
    const schema = { type: 'object', properties: { v: { anyOf: [{ type: 'string' }, { type: 'integer' }] } } }
    expect(issuesFor(schema, { v: true })).toEqual([{ path: 'v', message: 'does not match any allowed form' }])
  })

  it('keeps errors next to a failed anyOf that are not inside it', () => {
    const schema = {
      type: 'object',
      properties: { v: { anyOf: [{ type: 'string' }, { type: 'integer' }] }, w: { type: 'string' } },
    }
    const issues = issuesFor(schema, { v: true, w: 1 })
    expect(issues).toHaveLength(2)
    expect(issues).toContainEqual({ path: 'v', message: 'does not match any allowed form' })
    expect(issues).toContainEqual({ path: 'w', message: 'must be a string (got a number)' })
  })

  // Regression (audit): an empty object id got Ajv's own "must NOT have fewer than 1 characters".
  it.each([
    [{ type: 'string', minLength: 1 }, '', 'must not be empty'],
    [{ type: 'string', minLength: 3 }, 'ab', 'must be at least 3 characters long'],
    [{ type: 'array', minItems: 1 }, [], 'must not be empty'],
    [{ type: 'array', minItems: 2 }, [1], 'must have at least 2 items'],
  ])('says what a too short %j needs', (member, value, message) => {
    expect(issuesFor({ type: 'object', properties: { x: member } }, { x: value })).toEqual([{ path: 'x', message }])
  })

  it('reports every problem with allErrors, one issue each, in the document', () => {
    const schema = {
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: { name: { type: 'string' }, port: { type: 'integer' } },
    }
    expect(issuesFor(schema, { port: 'x', extra: 1 })).toEqual(
      expect.arrayContaining([
        { path: 'name', message: 'is required' },
        { path: 'extra', message: 'is not a known key' },
        { path: 'port', message: 'must be an integer (got a string)' },
      ]),
    )
    expect(issuesFor(schema, { port: 'x', extra: 1 })).toHaveLength(3)
  })

  it('drops exact duplicates', () => {
    const error = (keyword: string): ErrorObject => ({
      keyword,
      instancePath: '/a',
      schemaPath: `#/properties/a/${keyword}`,
      params: { type: 'string' },
      message: 'must be string',
    })
    expect(toIssues([error('type'), error('type')])).toEqual([{ path: 'a', message: 'must be a string' }])
  })

  it('reads a comma-joined type list as Ajv gives for a type array', () => {
    const error: ErrorObject = {
      keyword: 'type',
      instancePath: '/seed',
      schemaPath: '#/properties/seed/type',
      params: { type: 'integer,null' },
      message: 'must be integer,null',
    }
    expect(toIssues([error])).toEqual([{ path: 'seed', message: 'must be an integer or null' }])
  })
})

describe('formatIssue', () => {
  it('writes path: message', () => {
    expect(formatIssue({ path: 'models.0.name', message: 'is required' })).toBe('models.0.name: is required')
  })

  it('writes (root) for the document itself', () => {
    expect(formatIssue({ path: '', message: 'YAML: bad' })).toBe('(root): YAML: bad')
  })
})
