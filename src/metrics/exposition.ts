/**
 * The text a scrape of /metrics gets. prom-client writes a value that is
 * not a number as `Nan` (lib/util.js); the exposition format spells it
 * `NaN`. Prometheus reads either (Go's float parsing ignores case), a
 * strict OpenMetrics parser refuses the first, and Node's event-loop lag
 * mean and standard deviation are NaN until the first sample (an
 * observability audit saw them right after start).
 */
import type { Registry } from 'prom-client'

export async function exposition(registry: Registry): Promise<string> {
  return (await registry.metrics()).replace(/ Nan$/gm, ' NaN')
}
