/**
 * How many lines of one header a request carried. Node keeps the first of
 * some repeated headers (Host, Authorization) and joins others; a proxy in
 * front may read another line, so callers refuse a second one.
 */

/** `name` in lower case. Runs for every request: only names of the right length are lower-cased. */
export function headerLines(rawHeaders: readonly string[], name: string): number {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const line = rawHeaders[i]!
    if (line.length === name.length && line.toLowerCase() === name) count++
  }
  return count
}
