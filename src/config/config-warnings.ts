/**
 * What a valid configuration may still get wrong: said by `sluice check`
 * and logged at warn at every start and reload, never refused (each has a
 * use an operator may mean).
 */
import { mixedSettingsWarning } from '../auth/basic.js'
import { parseScryptHash } from '../auth/scrypt-hash.js'
import type { GatewayConfig } from './resolve.js'
import { UPSTREAM_NAMES } from './schema.js'

export function configWarnings(config: GatewayConfig): string[] {
  const warnings: string[] = []
  const hashes = config.auth.users.map((user) => parseScryptHash(user.password_scrypt)).filter((hash) => typeof hash !== 'string')
  const timing = mixedSettingsWarning(hashes)
  if (timing !== null) warnings.push(timing)
  // Perhaps a key kept but switched off; more often a list left empty by mistake (an operator audit).
  config.auth.keys.forEach((key, i) => {
    if (key.scopes.length === 0) warnings.push(`auth.keys.${i}.scopes: key "${key.id}" has no scopes, so every request with it is refused (403)`)
  })
  config.auth.users.forEach((user, i) => {
    if (user.scopes.length === 0) warnings.push(`auth.users.${i}.scopes: user "${user.username}" has no scopes, so every request with it is refused (403)`)
  })
  // RFC 7617 allows an empty password (an upstream taking a token as the username), so not refused; more
  // often a variable set but empty, sent as `user:` to an upstream that then refuses every request (an ops review).
  for (const name of UPSTREAM_NAMES) {
    const auth = config.upstreams[name]?.auth
    if (auth !== undefined && 'basic' in auth && auth.basic.password === '') {
      warnings.push(`upstreams.${name}.auth.basic.password: is empty, so the ${name} upstream gets a username and no password (a variable set but empty gives this; leave it only for an upstream that takes a username alone)`)
    }
  }
  return warnings
}
