/**
 * What a YAML problem is called in a config refusal, without the source
 * text it may quote. The yaml library's messages name the offending token
 * (`Unresolved alias …: STAR2xyz`, `Could not resolve tag: !x!secret`,
 * `Invalid escape sequence \uZZZZ`), and an unquoted secret starting with
 * `*`, `!` or `&` is such a token: it reached `sluice check`'s output, the
 * start's stderr and the reload's error log (a security audit). So the
 * refusal says what kind of problem it is, and where, never what was there.
 */

const PHRASES: Readonly<Record<string, string>> = {
  BAD_ALIAS: 'an alias (*name) that names no anchor; a value starting with * must be quoted',
  TAG_RESOLVE_FAILED: 'an unknown tag (!name); a value starting with ! must be quoted',
  BAD_DQ_ESCAPE: 'an invalid escape in a double-quoted string; quote text with backslashes in single quotes',
  BAD_SCALAR_START: 'a plain value starting with a reserved character (@ or `); quote it',
  DUPLICATE_KEY: 'a key given twice in one mapping',
  BAD_INDENT: 'bad indentation, or a bracket or brace not closed',
  TAB_AS_INDENT: 'a tab used for indentation',
  BLOCK_AS_IMPLICIT_KEY: 'a mapping nested on one line (key: key: value)',
  BAD_DIRECTIVE: 'an unknown % directive',
  MULTIPLE_DOCS: 'more than one document (---) in the file',
  MISSING_CHAR: 'a missing closing quote, bracket or brace',
  UNEXPECTED_TOKEN: 'something where YAML expects no more',
}

/** A problem the parser reported with its code. */
export function yamlProblem(code: string): string {
  return `YAML: ${PHRASES[code] ?? 'a syntax error'} (${code})`
}

/** A problem thrown while the parsed document is turned into data (aliases are resolved then). */
export function yamlThrownProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : ''
  if (message.startsWith('Unresolved alias')) return yamlProblem('BAD_ALIAS')
  if (message.startsWith('Excessive alias count')) return 'YAML: aliases that expand without bound (a "billion laughs" file)'
  return 'YAML: the document cannot be read as data'
}
