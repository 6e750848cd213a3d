/**
 * The `stream_options` a stream's backend gets when the gateway asks for
 * usage on the client's behalf (schemas/normalize-chat.ts) and the client
 * sent the object: its own members other than the two the gateway sets,
 * as the client wrote them, then `include_usage` and
 * `continuous_usage_stats`. Built from the parsed object, a member such as
 * 12345678901234567891 reached the backend rounded and `1.0` as `1` (a
 * splice review), where every other member goes as written.
 */
import { MemberRewrite } from '../json/member-rewrite.js'
import { topLevelLayout } from '../json/json-object-layout.js'

const SET_BY_GATEWAY = new Set(['include_usage', 'continuous_usage_stats'])

/** `fallback`: the object, for a body serialized whole. */
export function streamOptionsRewrite(fallback: Readonly<Record<string, unknown>>): MemberRewrite {
  return new MemberRewrite(rewrittenStreamOptions, fallback)
}

function rewrittenStreamOptions(object: Buffer): string | null {
  const layout = topLevelLayout(object)
  if (layout === null) return null
  const members: string[] = []
  for (const member of layout.members) {
    if (!SET_BY_GATEWAY.has(member.name)) members.push(`${JSON.stringify(member.name)}:${object.toString('utf8', member.start, member.end)}`)
  }
  members.push('"include_usage":true', '"continuous_usage_stats":false')
  return `{${members.join(',')}}`
}
