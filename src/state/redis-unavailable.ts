/** Thrown when Redis cannot answer a call (down, failing or over budget): admission goes local. */
export class RedisUnavailable extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'RedisUnavailable'
  }
}

/**
 * A key admission that ran over its budget: whether Redis, when its answer came, had counted the request
 * (the script admitted it) resolves later. Refused there, failed, or lost with the connection: false.
 */
export class LateKeyAdmission extends RedisUnavailable {
  readonly countedInRedis: Promise<boolean>

  constructor(message: string, countedInRedis: Promise<boolean>) {
    super(message)
    this.countedInRedis = countedInRedis
  }
}
