/**
 * The answer when a model has no backend that can take a request: for an
 * arrival (proxy/chat-dispatch.ts), and for the requests already waiting in
 * its queue when its last usable backend goes (backend-monitor.ts), which
 * would otherwise wait out `max_wait_ms` for nothing and then be told the
 * model was busy.
 */
import { GatewayError } from '../errors/gateway-error.js'

export function noHealthyBackend(model: string): GatewayError {
  return new GatewayError('no_healthy_backend', `Model "${model}" has no healthy backend right now.`)
}
