import type { Redis } from 'ioredis'

/**
 * Closes a connection, waiting at most `waitMs` for Redis: a frozen one
 * (SIGSTOP, a hung host) never answers, and a drain waiting on it never
 * exited (a black-box audit: SIGTERM, then nothing until Redis was thawed).
 */
export async function quit(client: Redis, waitMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const givenUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))
  try {
    await Promise.race([flushAndQuit(client), givenUp])
  } finally {
    clearTimeout(timer)
    client.disconnect()
  }
}

async function flushAndQuit(client: Redis): Promise<void> {
  try {
    // With auto-pipelining, commands issued just before (a drain's last slot
    // releases) wait for the next tick, while QUIT leaves at once and closes
    // the connection first: they were lost. A PING joins their batch, and its
    // answer means they were all answered.
    if (client.status === 'ready') await client.ping()
    if (client.status === 'ready') await client.quit()
  } catch {
    // Closing anyway.
  }
}
