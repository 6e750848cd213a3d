// A seeded multi-turn chat workload and a closed-loop runner for it: each
// conversation has its own long system prompt, its turns are sent one after
// the other (each carrying the whole history, answers included), and a
// bounded number of conversations run at once.
import { Pool } from 'undici'

function lcg(seed) {
  let state = seed >>> 0
  return () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32
}

const WORDS = (
  'account answer billing cache cluster context deploy error export format gateway graph invoice kernel ' +
  'latency ledger metric model network order policy queue refund region release request router schema ' +
  'service session shipment storage stream summary support tenant ticket token trace update upload ' +
  'vendor version warehouse window worker always briefly carefully never politely quickly only'
).split(' ')

function text(random, minChars, maxChars) {
  const target = minChars + Math.floor(random() * (maxChars - minChars))
  const words = []
  let length = 0
  while (length < target) {
    const word = WORDS[Math.floor(random() * WORDS.length)]
    words.push(word)
    length += word.length + 1
  }
  return words.join(' ')
}

/**
 * `conversations` scripts of `turns` user messages each: a system prompt of
 * 1,800 to 2,200 characters, user turns of 100 to 400 characters, and an
 * answer length (max_tokens) of 8 to 40 tokens per turn.
 */
export function makeWorkload({ seed, conversations, turns }) {
  const random = lcg(seed)
  return Array.from({ length: conversations }, (_, id) => ({
    id,
    system: `You are the assistant of team ${id}. Follow these instructions. ${text(random, 1800, 2200)}`,
    turns: Array.from({ length: turns }, () => ({ user: text(random, 100, 400), maxTokens: 8 + Math.floor(random() * 33) })),
  }))
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

async function converse(pool, headers, model, conversation, latencies, failures) {
  const messages = [{ role: 'system', content: conversation.system }]
  for (const turn of conversation.turns) {
    messages.push({ role: 'user', content: turn.user })
    const started = performance.now()
    try {
      const response = await pool.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers,
        body: JSON.stringify({ model, messages, max_tokens: turn.maxTokens }),
      })
      const answer = await response.body.json()
      if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}: ${JSON.stringify(answer)}`)
      latencies.push(performance.now() - started)
      messages.push({ role: 'assistant', content: answer.choices[0].message.content })
    } catch (error) {
      failures.push(String(error.message ?? error))
      return
    }
  }
}

/** Runs every conversation through `url`, `concurrency` at a time; latency of each request in ms. */
export async function runConversations({ url, token, model, workload, concurrency }) {
  const pool = new Pool(url, { connections: concurrency })
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` }
  const latencies = []
  const failures = []
  let nextConversation = 0
  const worker = async () => {
    while (nextConversation < workload.length) {
      await converse(pool, headers, model, workload[nextConversation++], latencies, failures)
    }
  }
  const began = performance.now()
  await Promise.all(Array.from({ length: concurrency }, worker))
  const wallMs = performance.now() - began
  await pool.close()
  const sorted = [...latencies].sort((a, b) => a - b)
  return {
    requests: latencies.length,
    failures: failures.length,
    first_failure: failures[0] ?? null,
    p50_ms: percentile(sorted, 50),
    p99_ms: percentile(sorted, 99),
    wall_s: wallMs / 1000,
    latencies_ms: sorted,
  }
}

/** `rounds` x `concurrency` one-message requests with short unique prompts, to warm the processes up. */
export async function warmUp({ url, token, model, concurrency, rounds = 3 }) {
  const pool = new Pool(url, { connections: concurrency })
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` }
  for (let round = 0; round < rounds; round++) {
    await Promise.all(
      Array.from({ length: concurrency }, async (_, i) => {
        const body = JSON.stringify({ model, messages: [{ role: 'user', content: `warm-up ${round}.${i}` }], max_tokens: 1 })
        const response = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body })
        await response.body.dump()
        if (response.statusCode !== 200) throw new Error(`warm-up: status ${response.statusCode}`)
      }),
    )
  }
  await pool.close()
}
