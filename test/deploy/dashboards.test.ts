import { readFile } from 'node:fs/promises'
import { parse } from 'yaml'
import { describe, expect, it } from 'vitest'
import { createMetrics } from '../../src/metrics/registry.js'

/** Metric names the gateway exports, with the series names histograms add. */
async function exportedNames(): Promise<Set<string>> {
  const metrics = createMetrics()
  const names = new Set<string>()
  for (const metric of await metrics.registry.getMetricsAsJSON()) {
    names.add(metric.name)
    if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`)
  }
  return names
}

/** Every sluice_* identifier in a PromQL expression. */
function sluiceNames(expr: string): string[] {
  return [...expr.matchAll(/\bsluice_[a-z_]+/g)].map((m) => m[0])
}

describe('dashboards and alerts use only exported metrics', () => {
  it('the Grafana dashboard queries exported metric names, and covers what operators need', async () => {
    const dashboard = JSON.parse(await readFile('deploy/grafana/sluice.json', 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] }
    const exported = await exportedNames()
    const used = dashboard.panels.flatMap((p) => p.targets.flatMap((t) => sluiceNames(t.expr)))
    expect(used.length).toBeGreaterThan(10)
    for (const name of used) expect(exported, `dashboard uses ${name}`).toContain(name)
    for (const needed of ['sluice_requests_total', 'sluice_time_to_first_token_seconds_bucket', 'sluice_tokens_total', 'sluice_queue_depth', 'sluice_queue_wait_seconds_bucket', 'sluice_backend_up', 'sluice_redis_up']) {
      expect(used).toContain(needed)
    }
  })

  it('the alert rules use exported metric names and cover the four required alerts', async () => {
    const rules = parse(await readFile('deploy/prometheus/alerts.yml', 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] }
    const exported = await exportedNames()
    const all = rules.groups.flatMap((g) => g.rules)
    for (const rule of all) for (const name of sluiceNames(rule.expr)) expect(exported, `${rule.alert} uses ${name}`).toContain(name)
    const alerts = all.map((r) => r.alert)
    expect(alerts).toEqual(expect.arrayContaining(['SluiceNoHealthyBackend', 'SluiceHighErrorRatio', 'SluiceQueueWaitHigh', 'SluiceRedisDown']))
    // Calls over the Redis budget admit past the shared slots while Redis is up: worth a warning.
    expect(all.find((rule) => rule.alert === 'SluiceRedisCallsOverBudget')?.expr).toContain('sluice_redis_local_admissions_total')
  })

  // A dead replica exports nothing, so every alert on its own series went quiet with it (an operator audit).
  it('a replica that stops answering its scrape pages, for the job Prometheus scrapes', async () => {
    const rules = parse(await readFile('deploy/prometheus/alerts.yml', 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] }
    const prometheus = parse(await readFile('deploy/prometheus/prometheus.yml', 'utf8')) as { scrape_configs: { job_name: string }[] }
    const down = rules.groups.flatMap((g) => g.rules).find((r) => r.alert === 'SluiceReplicaDown')
    expect(down?.expr).toBe(`up{job="${prometheus.scrape_configs[0]!.job_name}"} == 0`)
  })

  // A replica that is not ready answers /readyz 503 to every probe: that must not page as a 5xx ratio.
  const requestSelectors = (expr: string) => [...expr.matchAll(/sluice_requests_total(\{[^}]*\})?/g)].map((m) => m[1] ?? '')

  it('the 5xx ratio alert leaves out the service route (health probes)', async () => {
    const rules = parse(await readFile('deploy/prometheus/alerts.yml', 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] }
    const errorRatio = rules.groups.flatMap((g) => g.rules).find((r) => r.alert === 'SluiceHighErrorRatio')!
    const selectors = requestSelectors(errorRatio.expr)
    expect(selectors).toHaveLength(2)
    for (const selector of selectors) expect(selector).toContain('route!="service"')
  })

  it("so does the dashboard's error ratio panel, so it shows what the alert pages on", async () => {
    const dashboard = JSON.parse(await readFile('deploy/grafana/sluice.json', 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] }
    const panel = dashboard.panels.find((p) => p.title.startsWith('Error ratio'))!
    const selectors = panel.targets.flatMap((t) => requestSelectors(t.expr))
    expect(selectors).toHaveLength(2)
    for (const selector of selectors) expect(selector).toContain('route!="service"')
  })
})
