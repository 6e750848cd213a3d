/**
 * Which Authorization header an upstream receives (DESIGN.md): its own
 * configured credentials, or, with `forward_client: true`, the client's
 * already verified header unchanged. Otherwise none: the client's
 * credentials never leave the gateway.
 */
import type { UpstreamAuthSettings } from '../config/schema.js'

export function upstreamAuthorization(auth: UpstreamAuthSettings | undefined, clientHeader: string | undefined): string | undefined {
  if (auth === undefined) return undefined
  if ('bearer' in auth) return `Bearer ${auth.bearer}`
  if ('basic' in auth) return `Basic ${Buffer.from(`${auth.basic.username}:${auth.basic.password}`, 'utf8').toString('base64')}`
  return clientHeader
}
