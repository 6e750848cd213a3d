/**
 * What the platform stand-ins share: a RecordingServer underneath, exposed
 * as url / received / events / listen / close. A subclass only routes.
 */
import type { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import { RecordingServer, type RecordedRequest } from './recording-server.js'

export interface StandInAddress {
  host?: string
  port?: number
}

export abstract class RecordingStandIn<Options extends StandInAddress> {
  options: Options
  readonly #base: RecordingServer

  constructor(options: Options) {
    this.options = options
    this.#base = new RecordingServer((request, res) => this.route(request, res))
  }

  get url(): string {
    return this.#base.url
  }

  get received(): RecordedRequest[] {
    return this.#base.received
  }

  get events(): EventEmitter {
    return this.#base.events
  }

  listen(): Promise<void> {
    return this.#base.listen(this.options.host, this.options.port)
  }

  close(): Promise<void> {
    return this.#base.close()
  }

  protected abstract route(request: RecordedRequest, res: ServerResponse): void
}
