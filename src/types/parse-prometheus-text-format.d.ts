// The package ships no types; this is the part of its output we read.
declare module 'parse-prometheus-text-format' {
  interface Sample {
    readonly value?: string
    readonly labels?: Record<string, string>
  }
  interface MetricFamily {
    readonly name: string
    readonly help: string
    readonly type: string
    readonly metrics: readonly Sample[]
  }
  export default function parsePrometheusText(text: string): MetricFamily[]
}
