/**
 * FastAPI's 422 body, `{"detail": [issue, ...]}`, as the platform upstreams
 * send it when a request fails their schema. Issues carry `type`, `loc` and
 * `msg`; pydantic's `input` and `ctx` are left out, as nothing reads them.
 */

export interface ValidationIssue {
  type: string
  loc: (string | number)[]
  msg: string
}

export function validationBody(issues: ValidationIssue[]): { detail: ValidationIssue[] } {
  return { detail: issues }
}

export function missing(loc: (string | number)[]): ValidationIssue {
  return { type: 'missing', loc, msg: 'Field required' }
}

/** FastAPI's issue for a body that does not parse; the position is not tracked. */
export function jsonInvalid(): ValidationIssue {
  return { type: 'json_invalid', loc: ['body', 0], msg: 'JSON decode error' }
}

/** The body parsed, but is not an object. */
export function notAnObject(): ValidationIssue {
  return { type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from' }
}

/** pydantic's type and wording for a value of the wrong type. */
const WRONG_TYPE = {
  string: { type: 'string_type', msg: 'Input should be a valid string' },
  list: { type: 'list_type', msg: 'Input should be a valid list' },
  boolean: { type: 'bool_type', msg: 'Input should be a valid boolean' },
} as const

export function wrongType(loc: (string | number)[], expected: keyof typeof WRONG_TYPE): ValidationIssue {
  const { type, msg } = WRONG_TYPE[expected]
  return { type, loc, msg }
}

/**
 * Checks required string members of a JSON object body, in the given order,
 * and returns one issue per member that is absent or not a string.
 */
export function requireStrings(body: Record<string, unknown>, names: readonly string[]): ValidationIssue[] {
  return names.flatMap((name) => {
    if (!Object.hasOwn(body, name)) return [missing(['body', name])]
    return typeof body[name] === 'string' ? [] : [wrongType(['body', name], 'string')]
  })
}
