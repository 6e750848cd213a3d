/**
 * The stand-in's small fixed replies (errors, /v1/models, /metrics), with the
 * exact bodies vLLM sends, so the gateway's handling of them is tested
 * against the real wire format.
 */
import type { ServerResponse } from 'node:http'

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

/** vLLM ≥ 0.10.1 error body (before that `error` was flat at the top level). */
export function errorBody(message: string, type: string, status: number): Record<string, unknown> {
  return { error: { message, type, param: null, code: status } }
}

/** vLLM's --api-key middleware answers with this body, not the usual error shape. */
export const UNAUTHORIZED_BODY = { error: 'Unauthorized' }

/** FastAPI's default for an unknown route. */
export const NOT_FOUND_BODY = { detail: 'Not Found' }

export function modelsBody(modelName: string, created: number): Record<string, unknown> {
  return { object: 'list', data: [{ id: modelName, object: 'model', created, owned_by: 'vllm' }] }
}

/** The three gauges a load-aware balancer reads, printed as floats like vLLM's prometheus_client does. */
export function metricsText(modelName: string, running: number, waiting = 0): string {
  const labels = `{model_name="${modelName.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"}`
  return [
    gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', labels, running),
    gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', labels, waiting),
    gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', labels, 0),
  ].join('')
}

function gauge(name: string, help: string, labels: string, value: number): string {
  const printed = Number.isInteger(value) ? value.toFixed(1) : String(value)
  return `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name}${labels} ${printed}\n`
}
