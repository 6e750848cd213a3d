/**
 * ISO 8601 date-times in the extended calendar form Python's
 * `datetime.isoformat()` writes (the training upstream's own format) and RFC
 * 3339 profiles: `YYYY-MM-DDTHH:MM[:SS[.fraction]]` with an optional `Z` (or
 * `z`), `±HH`, `±HH:MM` or `±HHMM` offset. The fraction has any number of
 * digits after a `.` or a `,` (RFC 3339's `1*DIGIT`; ISO 8601 allows the
 * comma; Python 3.11's `fromisoformat` reads both): 1 to 9 digits refused
 * Go's and Java's nanosecond-and-beyond stamps (a platform review). The
 * separator may also be a space (`str(datetime)`) or a lowercase `t` (RFC
 * 3339 allows it). RFC 3339's `date-time` would require the offset. Every component is range-checked (no Feb 30, no hour 24, no
 * year 0000: Python's years start at 1), which `Date.parse` does not do: it rolls impossible dates over.
 */

const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?(?:[Zz]|[+-](\d{2})(?::?(\d{2}))?)?$/

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28
  return [4, 6, 9, 11].includes(month) ? 30 : 31
}

export function isIsoDateTime(text: string): boolean {
  const match = ISO_DATE_TIME.exec(text)
  if (match === null) return false
  const [year, month, day, hour, minute, second, offsetHour, offsetMinute] = match.slice(1).map((part) => (part === undefined ? 0 : Number(part)))
  return (
    year! >= 1 &&
    month! >= 1 &&
    month! <= 12 &&
    day! >= 1 &&
    day! <= daysInMonth(year!, month!) &&
    hour! <= 23 &&
    minute! <= 59 &&
    second! <= 59 &&
    offsetHour! <= 23 &&
    offsetMinute! <= 59
  )
}
