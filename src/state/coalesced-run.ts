/**
 * Async work that runs one at a time: asked for while it runs, it runs once
 * more when the current run ends, however many times it was asked. Serving a
 * queue over the network needs this: every freed slot, message and backstop
 * tick asks for a pass, and passes that overlap would claim for one head
 * twice.
 */
export class CoalescedRun {
  readonly #work: () => Promise<void>
  #running = false
  #again = false

  /** `work` must not reject: what it awaits is its own to handle. */
  constructor(work: () => Promise<void>) {
    this.#work = work
  }

  request(): void {
    if (this.#running) {
      this.#again = true
      return
    }
    this.#running = true
    void this.#work().finally(() => {
      this.#running = false
      if (!this.#again) return
      this.#again = false
      this.request()
    })
  }
}
