// The balancer benchmark's plot as hand-written SVG: two panels of grouped
// bars per strategy, prefix-cache hit rates (%) on the left, p50 and p99
// latency (ms) on the right. No plotting dependency.

const WIDTH = 820
const HEIGHT = 376
const TOP = 56
const BOTTOM = 300
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"'

function escape(text) {
  return String(text).replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;')
}

/** Gridline spacing and axis maximum: four or so steps of 1, 2, 2.5 or 5 times a power of ten. */
function axis(max) {
  const rough = max > 0 ? max / 4 : 1
  const power = 10 ** Math.floor(Math.log10(rough))
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((v) => v >= rough)
  return { step, ceiling: Math.ceil(max / step - 1e-9) * step || step }
}

/**
 * One panel: `groups` (strategies) of bars, one per series, from x0 to x1.
 * series: [{ label, color, values: number[], format }]
 */
function panel({ x0, x1, title, unit, groups, series, max }) {
  const { step, ceiling } = axis(max)
  const y = (v) => BOTTOM - (v / ceiling) * (BOTTOM - TOP)
  const parts = [`<text x="${(x0 + x1) / 2}" y="24" text-anchor="middle" font-size="15" font-weight="600">${escape(title)}</text>`]
  for (let value = 0; value <= ceiling + 1e-9; value += step) {
    parts.push(
      `<line x1="${x0}" x2="${x1}" y1="${y(value)}" y2="${y(value)}" stroke="#ddd"/>`,
      `<text x="${x0 - 6}" y="${y(value) + 4}" text-anchor="end" font-size="11" fill="#555">${escape(`${+value.toFixed(1)}${unit}`)}</text>`,
    )
  }
  const groupWidth = (x1 - x0) / groups.length
  const barWidth = Math.min(40, (groupWidth * 0.75) / series.length)
  groups.forEach((group, g) => {
    const center = x0 + groupWidth * (g + 0.5)
    const start = center - (barWidth * series.length) / 2
    series.forEach((s, i) => {
      const value = s.values[g]
      const x = start + i * barWidth
      parts.push(
        `<rect x="${x + 2}" y="${y(value)}" width="${barWidth - 4}" height="${BOTTOM - y(value)}" fill="${s.color}"><title>${escape(`${group} ${s.label}: ${s.format(value)}`)}</title></rect>`,
        `<text x="${x + barWidth / 2}" y="${y(value) - 4}" text-anchor="middle" font-size="10">${escape(s.format(value))}</text>`,
      )
    })
    parts.push(`<text x="${center}" y="${BOTTOM + 18}" text-anchor="middle" font-size="12">${escape(group)}</text>`)
  })
  parts.push(`<line x1="${x0}" x2="${x1}" y1="${BOTTOM}" y2="${BOTTOM}" stroke="#333"/>`)
  series.forEach((s, i) => {
    const lx = x0 + i * 150
    parts.push(
      `<rect x="${lx}" y="${BOTTOM + 32}" width="12" height="12" fill="${s.color}"/>`,
      `<text x="${lx + 17}" y="${BOTTOM + 42}" font-size="12">${escape(s.label)}</text>`,
    )
  })
  return parts.join('\n')
}

export function balancerChart(result) {
  const groups = Object.keys(result.strategies)
  const rows = Object.values(result.strategies)
  const percent = (v) => `${v.toFixed(1)} %`
  const millis = (v) => `${v.toFixed(0)} ms`
  const hits = panel({
    x0: 60,
    x1: 390,
    title: 'Prefix-cache hit rate',
    unit: ' %',
    groups,
    max: 100,
    series: [
      { label: 'requests with a hit', color: '#4e79a7', values: rows.map((r) => r.hit_rate * 100), format: percent },
      { label: 'prompt chars from cache', color: '#a0cbe8', values: rows.map((r) => r.cached_char_rate * 100), format: percent },
    ],
  })
  const latency = panel({
    x0: 480,
    x1: WIDTH - 20,
    title: 'Request latency',
    unit: ' ms',
    groups,
    max: Math.max(...rows.map((r) => r.p99_ms)),
    series: [
      { label: 'p50', color: '#f28e2b', values: rows.map((r) => r.p50_ms), format: millis },
      { label: 'p99', color: '#e15759', values: rows.map((r) => r.p99_ms), format: millis },
    ],
  })
  const w = result.workload
  const caption = `${w.conversations} conversations x ${w.turns} turns, ${w.concurrency} at a time, ${result.backends} simulated backends; hit ceiling ${(result.ceiling.hit_rate * 100).toFixed(1)} % / ${(result.ceiling.cached_char_rate * 100).toFixed(1)} %; ${result.date.slice(0, 10)}, ${result.machine.cores} cores`
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" ${FONT}>
<rect width="100%" height="100%" fill="#fff"/>
${hits}
${latency}
<text x="${WIDTH / 2}" y="${HEIGHT - 6}" text-anchor="middle" font-size="11" fill="#555">${escape(caption)}</text>
</svg>
`
}
