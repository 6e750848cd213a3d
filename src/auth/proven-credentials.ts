/**
 * The Authorization header each client connection last proved, and whom it
 * proved. A keep-alive client sends the same header on every request, and
 * checking it again each time (parse, sha256 and a constant-time compare
 * per key; scrypt for Basic) was the largest single cost of a chat
 * request's own work in the bench (about 4 µs of 84). A request whose header
 * is exactly the one its connection last proved gets the same principal.
 *
 * Safe when several clients share one connection (a pooling proxy in
 * front): only headers that passed the full check are remembered, and a
 * header is compared with the remembered one in constant time over the
 * whole remembered value, so a different header learns nothing from how
 * long the comparison took. Scopes are still checked per route. Each
 * generation has its own memo, so a reload that removes a key or a user
 * starts from nothing.
 */
import type { Principal } from './principal.js'

interface Proof {
  readonly header: string
  readonly scheme: 'bearer' | 'basic'
  readonly principal: Principal
}

export class ProvenCredentials {
  /** Keyed by the connection's socket: the entry goes when the connection does. */
  readonly #byConnection = new WeakMap<object, Proof>()

  /** Whom `header` proved on this connection before, or null: check it in full. */
  recall(connection: object, header: string, scheme: Proof['scheme']): Principal | null {
    const proof = this.#byConnection.get(connection)
    if (proof === undefined || proof.scheme !== scheme || !sameText(proof.header, header)) return null
    return proof.principal
  }

  remember(connection: object, header: string, scheme: Proof['scheme'], principal: Principal): void {
    this.#byConnection.set(connection, { header, scheme, principal })
  }
}

/**
 * Equal strings, compared without an early exit: the loop runs over all of
 * `known` whatever `presented` holds, so its duration depends on the
 * remembered header's length only.
 */
export function sameText(known: string, presented: string): boolean {
  let difference = known.length ^ presented.length
  for (let i = 0; i < known.length; i++) {
    difference |= known.charCodeAt(i) ^ (i < presented.length ? presented.charCodeAt(i) : 0)
  }
  return difference === 0
}
