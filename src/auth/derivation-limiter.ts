/**
 * At most `max` password derivations at once; up to `maxWaiting` more wait
 * their turn, one whose client left while it waited never runs, and the
 * rest are refused at once. scrypt runs on libuv's thread pool (4 threads),
 * which also resolves hostnames: a resource audit's flood of failed Basic
 * attempts filled it, backends addressed by name timed out connecting
 * (502s), and every queued derivation still ran (10.6 s of CPU) after its
 * clients had gone. The line was unbounded until a flood of held
 * connections was seen to make it as long as the flood, each check
 * waiting behind all of them.
 */

/** Refused: the client left before its derivation could start. */
export class ClientLeftError extends Error {
  constructor() {
    super('The client left before its credentials were checked.')
    this.name = 'ClientLeftError'
  }
}

/** Refused: as many checks wait already as the line holds. */
export class DerivationsBusyError extends Error {
  constructor() {
    super('Too many credential checks are waiting: retry in a second.')
    this.name = 'DerivationsBusyError'
  }
}

export class DerivationLimiter {
  readonly #max: number
  readonly #maxWaiting: number
  #running = 0
  /** Each resolves its waiter with a slot handed over: counted already, so no newcomer can take it first. */
  readonly #waiting: (() => void)[] = []

  constructor(max: number, maxWaiting: number) {
    this.#max = max
    this.#maxWaiting = maxWaiting
  }

  async run<T>(derive: () => Promise<T>, clientGone?: AbortSignal): Promise<T> {
    if (clientGone?.aborted === true) throw new ClientLeftError()
    if (this.#running < this.#max) this.#running++
    else if (this.#waiting.length < this.#maxWaiting) await this.#turn(clientGone)
    else throw new DerivationsBusyError()
    try {
      return await derive()
    } finally {
      this.#release()
    }
  }

  /** Resolves when a slot is handed to this one; a client that leaves meanwhile leaves the line. */
  #turn(clientGone?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const ready = (): void => {
        clientGone?.removeEventListener('abort', left)
        resolve()
      }
      const left = (): void => {
        this.#waiting.splice(this.#waiting.indexOf(ready), 1)
        reject(new ClientLeftError())
      }
      this.#waiting.push(ready)
      clientGone?.addEventListener('abort', left, { once: true })
    })
  }

  /** The slot goes to the first in line, or back to the pool. */
  #release(): void {
    const next = this.#waiting.shift()
    if (next !== undefined) next()
    else this.#running--
  }
}
