/**
 * docker-compose.yml without a Docker engine: every service it names exists,
 * every file it mounts or builds from is in the repository, the replica
 * config it mounts is valid, and the ports agree across compose, nginx,
 * Prometheus, the replica config and the stand-ins.
 */
import { existsSync } from 'node:fs'
import { CLIENT_KEEP_ALIVE_MS } from '../../src/public-listener.js'
import { readFile } from 'node:fs/promises'
import { parse } from 'yaml'
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/load.js'
import type { GatewayConfig } from '../../src/config/resolve.js'

interface Service {
  readonly image?: string
  readonly build?: string | { context: string; dockerfile?: string }
  readonly command?: string[]
  readonly environment?: Record<string, string>
  readonly volumes?: string[]
  readonly ports?: string[]
  readonly depends_on?: string[] | Record<string, unknown>
  readonly healthcheck?: { test: string[] }
  readonly stop_grace_period?: string
  readonly restart?: string
}

async function compose(): Promise<Record<string, Service>> {
  const file = parse(await readFile('docker-compose.yml', 'utf8')) as { services: Record<string, Service> }
  return file.services
}

function dependencies(service: Service): string[] {
  const deps = service.depends_on ?? []
  return Array.isArray(deps) ? deps : Object.keys(deps)
}

/** Bind mounts as [repo path, container path]. */
function mounts(service: Service): [string, string][] {
  return (service.volumes ?? []).filter((v) => v.startsWith('./')).map((v) => v.split(':').slice(0, 2) as [string, string])
}

/** "host:container" → [host, container]. */
function published(service: Service): [number, number][] {
  return (service.ports ?? []).map((p) => p.split(':').map(Number) as [number, number])
}

/** Host and port of a "name:port" or URL. */
function hostPort(target: string): [string, number] {
  const url = new URL(target.includes('://') ? target : `tcp://${target}`)
  return [url.hostname, Number(url.port)]
}

async function replicaConfig(services: Record<string, Service>, name: string): Promise<GatewayConfig> {
  const service = services[name]!
  const [source] = mounts(service).find(([, target]) => service.command?.includes(target))!
  const result = parseConfig(await readFile(source, 'utf8'), service.environment ?? {})
  if (!result.ok) throw new Error(`${source}: ${JSON.stringify(result.issues)}`)
  return result.config
}

const replicas = ['sluice-1', 'sluice-2']

describe('docker-compose.yml', () => {
  it('has Redis, two replicas, the stand-ins, a load balancer and Prometheus, and every dependency is a service', async () => {
    const services = await compose()
    expect(Object.keys(services).sort()).toEqual(['lb', 'prometheus', 'redis', 'sluice-1', 'sluice-2', 'stand-ins'])
    for (const [name, service] of Object.entries(services)) {
      for (const dependency of dependencies(service)) expect(Object.keys(services), `${name} depends on ${dependency}`).toContain(dependency)
    }
    expect(dependencies(services.lb!).sort()).toEqual(replicas)
    for (const replica of replicas) expect(dependencies(services[replica]!)).toEqual(expect.arrayContaining(['redis', 'stand-ins']))
    // A crashed process comes back (an operator audit: no service had a restart policy).
    for (const [name, service] of Object.entries(services)) expect(service.restart, name).toBe('unless-stopped')
  })

  it('mounts and builds only files that are in the repository, and runs what the build produces', async () => {
    const services = await compose()
    for (const [name, service] of Object.entries(services)) {
      for (const [source] of mounts(service)) expect(existsSync(source), `${name} mounts ${source}`).toBe(true)
      if (service.build !== undefined) {
        const context = typeof service.build === 'string' ? service.build : service.build.context
        const dockerfile = typeof service.build === 'string' ? 'Dockerfile' : (service.build.dockerfile ?? 'Dockerfile')
        expect(existsSync(`${context}/${dockerfile}`), `${name} builds from ${context}/${dockerfile}`).toBe(true)
      }
      // A built script dist/x.js comes from src/x.ts.
      const script = service.command?.find((part) => part.startsWith('dist/'))
      if (script !== undefined) expect(existsSync(script.replace(/^dist\//, 'src/').replace(/\.js$/, '.ts')), `${name} runs ${script}`).toBe(true)
    }
    const dockerfile = await readFile('Dockerfile', 'utf8')
    expect(dockerfile).toMatch(/^FROM node:20/m)
  })

  it('gives both replicas the same valid config, in redis mode on the compose Redis', async () => {
    const services = await compose()
    const [one, two] = [await replicaConfig(services, 'sluice-1'), await replicaConfig(services, 'sluice-2')]
    expect(one).toEqual(two)
    expect(one.state.kind).toBe('redis')
    const [redisHost, redisPort] = hostPort(one.state.redis_url!)
    expect(Object.keys(services)).toContain(redisHost)
    expect(redisPort).toBe(6379)
    expect(one.server.host).toBe('0.0.0.0')
  })

  it('agrees on ports: load balancer → replicas, Prometheus → metrics ports, replicas → stand-ins', async () => {
    const services = await compose()
    const config = await replicaConfig(services, 'sluice-1')

    const hostPorts = Object.values(services).flatMap((s) => published(s).map(([host]) => host))
    expect(new Set(hostPorts).size).toBe(hostPorts.length)

    // nginx listens on the port compose publishes, and proxies to each replica's server.port.
    const [nginxSource] = mounts(services.lb!).find(([, target]) => target === '/etc/nginx/nginx.conf')!
    const nginx = await readFile(nginxSource, 'utf8')
    const listen = [...nginx.matchAll(/^\s*listen\s+(\d+)\s*;/gm)].map((m) => Number(m[1]))
    expect(listen).toEqual(published(services.lb!).map(([, container]) => container))
    const upstream = /upstream\s+\w+\s*\{([^}]*)\}/.exec(nginx)![1]!
    const servers = [...upstream.matchAll(/^\s*server\s+([\w.-]+:\d+)/gm)].map((m) => hostPort(m[1]!))
    expect(servers).toEqual(replicas.map((r) => [r, config.server.port]))
    // Replicas are found again by name when recreated (an operator audit: nginx resolved them once, at start).
    expect([...upstream.matchAll(/^\s*server\s+\S+\s+resolve\s*;/gm)]).toHaveLength(replicas.length)
    expect(upstream).toMatch(/^\s*zone\s+\w+\s+\d+k\s*;/m)
    expect(nginx).toMatch(/^\s*resolver\s+127\.0\.0\.11\b/m)
    // Pooled connections close before the replicas close them (an operator audit: nginx's default is 60 s).
    const idle = /^\s*keepalive_timeout\s+(\d+)s\s*;/m.exec(upstream)
    expect(idle, 'keepalive_timeout in the upstream block').not.toBeNull()
    expect(Number(idle![1]) * 1000).toBeLessThan(CLIENT_KEEP_ALIVE_MS)

    // Prometheus scrapes every replica on server.metrics_port, and loads rule files that are mounted.
    const [promSource] = mounts(services.prometheus!).find(([, target]) => target === '/etc/prometheus/prometheus.yml')!
    const prometheus = parse(await readFile(promSource, 'utf8')) as { rule_files?: string[]; scrape_configs: { static_configs: { targets: string[] }[] }[] }
    const targets = prometheus.scrape_configs.flatMap((c) => c.static_configs.flatMap((s) => s.targets)).map(hostPort)
    expect(config.server.metrics_port).toBeDefined()
    expect(targets).toEqual(replicas.map((r) => [r, config.server.metrics_port]))
    const promMounts = mounts(services.prometheus!).map(([, target]) => target)
    for (const rules of prometheus.rule_files ?? []) expect(promMounts).toContain(rules)
    expect(published(services.prometheus!).map(([, container]) => container)).toEqual([9090])

    // Every backend and upstream URL is a port the stand-ins service listens on.
    const env = services['stand-ins']!.environment!
    const standInPorts = [...env.VLLM_PORTS!.split(',').map(Number), Number(env.TRAINING_PORT), Number(env.OBJECTS_PORT)]
    const urls = [...config.models.flatMap((m) => m.backends.map((b) => b.url)), ...Object.values(config.upstreams).map((u) => u!.url)]
    for (const url of urls) {
      const [host, port] = hostPort(url)
      expect(host, url).toBe('stand-ins')
      expect(standInPorts, url).toContain(port)
    }

    // The replicas' health check asks the port they listen on.
    for (const replica of replicas) expect(services[replica]!.healthcheck!.test.join(' ')).toContain(`127.0.0.1:${config.server.port}/readyz`)

    // The replicas start once every vLLM stand-in answers /health (a first check that fails keeps a
    // backend down until the next one); compose reads `$$` as a literal `$`.
    const standInCheck = services['stand-ins']!.healthcheck!.test.join(' ').replaceAll('$$', '$')
    for (const port of env.VLLM_PORTS!.split(',')) expect(standInCheck).toContain(port.trim())
    expect(standInCheck).toContain('127.0.0.1:${p}/health')
    for (const replica of replicas) expect((services[replica]!.depends_on as Record<string, { condition: string }>)['stand-ins']).toEqual({ condition: 'service_healthy' })
  })
})

describe('stopping a replica', () => {
  it.each(replicas)('%s: Docker waits longer than the drain (stop_grace_period over shutdown_grace_ms) before SIGKILL', async (name) => {
    const services = await compose()
    const period = /^(\d+)s$/.exec(services[name]!.stop_grace_period ?? '')
    expect(period, `${name} sets stop_grace_period in seconds`).not.toBeNull()
    const config = await replicaConfig(services, name)
    expect(Number(period![1]) * 1000).toBeGreaterThan(config.server.shutdown_grace_ms)
  })
})
