// The prom-client classes boundary uses, loaded file by file, and the process_* / nodejs_* default metrics.
// prom-client's index also loads Pushgateway, cluster aggregation and, for exemplars, @opentelemetry/api
// (~150 modules, ~10 MB of RSS in every sidecar; issue 15); boundary uses none of them. A module `require` of this
// form is what scripts/bundle.ts lets the image's bundle carry the package in.

import { createRequire } from 'node:module';
import type * as Prom from 'prom-client';

const require = createRequire(import.meta.url);

export const Registry: typeof Prom.Registry = require('prom-client/lib/registry');
export type Registry = Prom.Registry;
export const Counter: typeof Prom.Counter = require('prom-client/lib/counter');
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge: typeof Prom.Gauge = require('prom-client/lib/gauge');
export type Gauge<T extends string = string> = Prom.Gauge<T>;

type DefaultMetric = (registry: Registry, config: Prom.DefaultMetricsCollectorConfiguration<Prom.RegistryContentType>) => void;

/**
 * prom-client's collectDefaultMetrics() list minus processCpuTotal, the module that pulls in @opentelemetry/api
 * (cpuSeconds() below registers the same three series), and eventLoopLag, whose 10 ms monitor never lets an idle
 * process sleep (event-loop-lag.ts registers the same eight series; metrics.ts calls both). Same names, help and
 * values as the defaults. Each file is named in full, so that the image's bundle carries it (scripts/bundle.ts).
 */
function defaultMetrics(): readonly DefaultMetric[] {
  return [
    require('prom-client/lib/metrics/processStartTime'),
    require('prom-client/lib/metrics/osMemoryHeap'),
    require('prom-client/lib/metrics/processOpenFileDescriptors'),
    require('prom-client/lib/metrics/processMaxFileDescriptors'),
    require('prom-client/lib/metrics/processResources'),
    require('prom-client/lib/metrics/processHandles'),
    require('prom-client/lib/metrics/processRequests'),
    require('prom-client/lib/metrics/heapSizeAndUsed'),
    require('prom-client/lib/metrics/heapSpacesSizeAndUsed'),
    require('prom-client/lib/metrics/version'),
    require('prom-client/lib/metrics/gc'),
  ];
}

/** Registers the process_* and nodejs_* defaults on `registry` only. */
export function collectDefaultMetrics(registry: Registry): void {
  const config = { register: registry };
  cpuSeconds(registry);
  for (const register of defaultMetrics()) register(registry, config);
}

/** process_cpu_{user,system,}_seconds_total, read from process.cpuUsage() at scrape. */
function cpuSeconds(registry: Registry): void {
  let last = process.cpuUsage();
  const registers = [registry];
  const system = new Counter({ name: 'process_cpu_system_seconds_total', help: 'Total system CPU time spent in seconds.', registers });
  const total = new Counter({ name: 'process_cpu_seconds_total', help: 'Total user and system CPU time spent in seconds.', registers });
  new Counter({
    name: 'process_cpu_user_seconds_total',
    help: 'Total user CPU time spent in seconds.',
    registers,
    // One collect sets all three, as prom-client's own does.
    collect() {
      const now = process.cpuUsage();
      const user = (now.user - last.user) / 1e6;
      const sys = (now.system - last.system) / 1e6;
      last = now;
      this.inc(user);
      system.inc(sys);
      total.inc(user + sys);
    },
  });
}
