/** Thrown when Redis cannot answer a call (down, failing or over budget): admission goes local. */
export class RedisUnavailable extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'RedisUnavailable'
  }
}
