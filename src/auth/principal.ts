/** Who a request was authenticated as. Never holds the credential itself. */
import type { ApiKey, Scope } from '../config/schema.js'

export type Principal =
  | { readonly kind: 'key'; readonly id: string; readonly scopes: readonly Scope[]; readonly key: ApiKey }
  | { readonly kind: 'user'; readonly id: string; readonly scopes: readonly Scope[] }

/** How a route is protected. */
export interface AuthRequirement {
  readonly scheme: 'bearer' | 'basic'
  readonly scope: Scope
}
