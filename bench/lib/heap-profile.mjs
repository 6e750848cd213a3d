// Reads a V8 sampling heap profile (HeapProfiler.stopSampling's `profile`:
// a call tree whose nodes carry the bytes sampled where that function
// allocated itself) into bytes per allocation site. A site is a function
// and where it is defined, its path cut to what says whose code it is:
// "fastify/lib/reply.js", "dist/proxy/chat-forward.js", "node:_http_outgoing".
// Optimized code allocates for the functions inlined into it, so a site is
// the outermost function V8 compiled, not always the line that allocated.

/** { total, bySite: Map<site, bytes> } */
export function allocationSites(profile) {
  const bySite = new Map()
  let total = 0
  const pending = [profile.head]
  while (pending.length > 0) {
    const node = pending.pop()
    if (node.selfSize > 0) {
      const site = siteOf(node.callFrame)
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize)
      total += node.selfSize
    }
    pending.push(...node.children)
  }
  return { total, bySite }
}

function siteOf({ functionName, url, lineNumber }) {
  const name = functionName === '' ? '(anonymous)' : functionName
  if (url === '') return `${name} (V8 or native)`
  return `${name} ${shortPath(url)}:${lineNumber + 1}`
}

function shortPath(url) {
  const dependency = /node_modules\/(.*)$/.exec(url)
  if (dependency) return dependency[1]
  const ours = /\/((?:dist|bench)\/.*)$/.exec(url)
  if (ours) return ours[1]
  return url
}
