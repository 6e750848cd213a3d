/**
 * The path of a request target, as logs and error messages may show it.
 * An absolute-form target (`http://user:pw@host/path`, RFC 9112 §3.2.2)
 * loses its scheme and authority, which may carry credentials; the query
 * is cut (it may carry a signature or a token), and so is a fragment
 * (`#…`, never part of a valid target, yet a client may send one).
 */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/

export function targetPath(url: string): string {
  const absolute = ABSOLUTE_FORM.exec(url)
  const rest = absolute === null ? url : url.slice(absolute[0].length)
  const end = firstOf(rest, '?', '#')
  const path = end === -1 ? rest : rest.slice(0, end)
  // An absolute-form target with no path names the origin's root.
  return absolute !== null && path === '' ? '/' : path
}

function firstOf(text: string, a: string, b: string): number {
  const at = text.indexOf(a)
  const bt = text.indexOf(b)
  return at === -1 ? bt : bt === -1 ? at : Math.min(at, bt)
}

/** The target's path as an error message quotes it: cut at 200 characters (a client can send kilobytes of path). */
export function shownPath(url: string): string {
  const path = targetPath(url)
  return path.length > 200 ? `${path.slice(0, 200)}…` : path
}
