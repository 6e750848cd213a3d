/**
 * At most `max` password derivations at once; the rest wait their turn, and
 * one whose client left while it waited never runs. scrypt runs on libuv's
 * thread pool (4 threads), which also resolves hostnames: a resource audit's
 * flood of failed Basic attempts filled it, backends addressed by name
 * timed out connecting (502s), and every queued derivation still ran (10.6 s
 * of CPU) after its clients had gone.
 */

/** Refused: the client left before its derivation could start. */
export class ClientLeftError extends Error {
  constructor() {
    super('The client left before its credentials were checked.')
    this.name = 'ClientLeftError'
  }
}

export class DerivationLimiter {
  readonly #max: number
  #running = 0
  readonly #waiting: (() => void)[] = []

  constructor(max: number) {
    this.#max = max
  }

  async run<T>(derive: () => Promise<T>, clientGone?: AbortSignal): Promise<T> {
    if (this.#running >= this.#max) await this.#turn(clientGone)
    if (clientGone?.aborted === true) {
      this.#next()
      throw new ClientLeftError()
    }
    this.#running++
    try {
      return await derive()
    } finally {
      this.#running--
      this.#next()
    }
  }

  /** Resolves when a derivation ends and this one is first in line; a client that leaves meanwhile leaves the line. */
  #turn(clientGone?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const ready = (): void => {
        clientGone?.removeEventListener('abort', left)
        resolve()
      }
      const left = (): void => {
        const at = this.#waiting.indexOf(ready)
        if (at >= 0) this.#waiting.splice(at, 1)
        reject(new ClientLeftError())
      }
      this.#waiting.push(ready)
      clientGone?.addEventListener('abort', left, { once: true })
    })
  }

  #next(): void {
    if (this.#running < this.#max) this.#waiting.shift()?.()
  }
}
