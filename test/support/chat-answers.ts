/** Checking chat answers read as text in load tests: is a 200 the whole answer? */

/**
 * A 200 is whole: the completion's content equals `expected`, or, for a
 * stream, every token arrived and then `[DONE]`, with no error event.
 */
export function answerIsWhole(kind: 'plain' | 'stream', text: string, expected: string): boolean {
  if (kind === 'plain') {
    const parsed = JSON.parse(text) as { choices?: { message?: { content?: string } }[] }
    return parsed.choices?.[0]?.message?.content === expected
  }
  const events = text.split('\n\n').filter((e) => e !== '')
  if (events.at(-1) !== 'data: [DONE]' || text.includes('"error"')) return false
  const content = events
    .slice(0, -1)
    .map((e) => (JSON.parse(e.slice('data: '.length)) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '')
    .join('')
  return content === expected
}
