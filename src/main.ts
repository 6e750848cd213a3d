/**
 * The entry point. A SIGHUP with no listener kills a Node process, and one
 * may come at any moment, a config-reload sidecar's or an operator's as the
 * gateway starts: before anything else is loaded (the imports alone take
 * ~0.3 s, then the config is read), a listener counts them, and reloads are
 * ignored until the gateway is up. Everything else is in cli/serve.ts,
 * loaded after; only this file's own lines run before the listener exists.
 */
let handler: (() => void) | null = null
let early = 0
process.on('SIGHUP', () => {
  if (handler === null) early++
  else handler()
})

const { serve } = await import('./cli/serve.js')
serve({
  early: () => early,
  handle: (next) => {
    handler = next
  },
})
