/**
 * undici's connector with a connect timeout that fires on time. undici runs
 * its own on a shared timer ticking every ~0.5 s, so a 2 s `connect_ms`
 * fired after 2.0-3.0 s and a 300 ms one after up to 1 s: failover to the
 * next backend waited that much longer for a host that drops packets. Here
 * each connection attempt has a Node timer of its own (a new connection is
 * rare with keep-alive, so the timer costs nothing per request); expiry
 * destroys the socket with undici's ConnectTimeoutError, the error undici
 * itself would raise, so it is classified and retried the same way.
 */
import type { Socket } from 'node:net'
import { buildConnector, errors } from 'undici'

export function exactConnector(timeoutMs: number): buildConnector.connector {
  // undici's own timer stays as a backstop; this one fires first.
  const connect = buildConnector({ timeout: timeoutMs })
  return (options, callback) => {
    const timer = setTimeout(() => {
      socket?.destroy(new errors.ConnectTimeoutError(`Connect Timeout Error (attempted address: ${options.hostname}:${options.port}, timeout: ${timeoutMs}ms)`))
    }, timeoutMs)
    // A pending attempt does not keep the process alive on its own (as undici's timer does not).
    timer.unref()
    // Typed as void, but undici 7's connector returns the socket it opened.
    const socket = connect(options, (...result) => {
      clearTimeout(timer)
      callback(...result)
    }) as unknown as Socket | undefined
    return socket
  }
}
