// Loaded into a target with `node --import` by bench/allocations.mjs, and
// driven by SIGUSR2, one step per signal:
//   0. start counting GCs;
//   1. stop; the counts;
//   2. start V8's sampling heap profiler, keeping the samples of objects the
//      GC has already collected (without that flag it reports only what is
//      still alive, which for a proxy is almost nothing);
//   3. stop; the profile.
// GCs are counted apart from the profiler: with it on, scavenges took ~5×
// as long (2026-11-25), while their number stayed the same.
// The steps are driven as lib/signal-steps.mjs says.
import { Session } from 'node:inspector'
import { constants, PerformanceObserver } from 'node:perf_hooks'
import { serveSteps } from './signal-steps.mjs'

const SAMPLING_INTERVAL_BYTES = 512
const session = new Session()
session.connect()
const post = (method, params = {}) => new Promise((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))))

function countGcs() {
  const gcs = { scavenges: 0, mark_compacts: 0, other: 0, pause_ms: 0 }
  const add = (entries) => {
    for (const entry of entries) {
      const kind = entry.detail?.kind
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) gcs.scavenges++
      else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) gcs.mark_compacts++
      else gcs.other++
      gcs.pause_ms += entry.duration
    }
  }
  const observer = new PerformanceObserver((list) => add(list.getEntries()))
  observer.observe({ entryTypes: ['gc'] })
  return () => {
    add(observer.takeRecords())
    observer.disconnect()
    return gcs
  }
}

let stopCounting = null
const steps = [
  () => {
    stopCounting = countGcs()
    return ''
  },
  () => JSON.stringify(stopCounting()),
  async () => {
    await post('HeapProfiler.startSampling', { samplingInterval: SAMPLING_INTERVAL_BYTES, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true })
    return ''
  },
  async () => JSON.stringify((await post('HeapProfiler.stopSampling')).profile),
]

serveSteps(steps)
