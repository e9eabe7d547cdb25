// The boundary-wide metrics the composition root owns (catalogue entries in src/metric-catalogue.ts): process and
// runtime defaults, build info, readiness, policy generation and reloads, and the control channel's state,
// reconnects and forwarded events. Gauges are read at scrape time; counters come from the audit events already
// emitted, so no part grows a metrics dependency. Never records a host, path or address.

import type { Registry } from 'prom-client';
import { METRICS } from './metric-catalogue.js';
import { CONTROL_STATES } from '../control/metric-specs.js';
import type { ControlState } from '../control/client.js';
import { type AuditSink, observedSink } from '../telemetry/event.js';
import { collectDefaultProcessMetrics, createCounter, createGauge } from '../telemetry/metrics.js';

export interface BoundaryMetricsOptions {
  readonly registry: Registry;
  readonly version: string;
  readonly ready: () => boolean;
  readonly generation: () => number;
  /** Attached mode only: the control client's state now. */
  readonly control: () => ControlState | undefined;
  /** Log lines dropped since start (telemetry/log-destination.ts), a running total. */
  readonly logLinesDropped: () => number;
}

export interface BoundaryMetrics {
  /** Counts policy reloads and control reconnects from the events on their way to `sink`. */
  meter(sink: AuditSink): AuditSink;
}

export function createBoundaryMetrics(options: BoundaryMetricsOptions): BoundaryMetrics {
  const { registry } = options;
  collectDefaultProcessMetrics(registry);
  createGauge(registry, METRICS.boundary_build_info).set({ version: options.version, node: process.version }, 1);
  createGauge(registry, METRICS.boundary_ready, { collect: (gauge) => gauge.set({}, options.ready() ? 1 : 0) });
  createGauge(registry, METRICS.boundary_policy_generation, { collect: (gauge) => gauge.set({}, options.generation()) });
  createGauge(registry, METRICS.boundary_control_state, {
    collect(gauge) {
      const phase = options.control()?.phase;
      for (const state of CONTROL_STATES) gauge.set({ state }, state === phase ? 1 : 0);
    },
  });
  // The control client and the log keep running totals; at each scrape a counter gains what its total gained.
  const recorded = new Map<string, number>();
  const gained = (key: string, total: number): number => {
    const last = recorded.get(key) ?? 0;
    if (total <= last) return 0;
    recorded.set(key, total);
    return total - last;
  };
  createCounter(registry, METRICS.boundary_control_events_total, {
    collect(counter) {
      const events = options.control()?.events;
      if (events === undefined) return;
      const forwarded = gained('control forwarded', events.sent);
      const dropped = gained('control dropped', events.dropped);
      if (forwarded > 0) counter.inc({ outcome: 'forwarded' }, forwarded);
      if (dropped > 0) counter.inc({ outcome: 'dropped' }, dropped);
    },
  });
  createCounter(registry, METRICS.boundary_log_lines_dropped_total, {
    collect(counter) {
      const dropped = gained('log dropped', options.logLinesDropped());
      if (dropped > 0) counter.inc({}, dropped);
    },
  });
  const reloads = createCounter(registry, METRICS.boundary_policy_reloads_total);
  const reconnects = createCounter(registry, METRICS.boundary_control_reconnects_total);
  return {
    meter(sink) {
      return observedSink(sink, (event) => {
        if (event.class === 'CONFIG' && (event.activity === 'LOADED' || event.activity === 'FAILED')) {
          // Policy loads from the file watcher and the control channel say `policy ...`; credential and
          // certificate loads share the activity and are not policy reloads.
          if (event.message?.startsWith('policy ') === true) {
            reloads.inc({ source: event.engine === 'control' ? 'control' : 'file', outcome: event.activity === 'LOADED' ? 'loaded' : 'refused' });
          }
        } else if (event.class === 'NET' && event.engine === 'control' && (event.activity === 'FAIL' || event.activity === 'CLOSE')) {
          const error = event.unmapped?.error as { kind?: unknown } | undefined;
          reconnects.inc({ kind: (typeof error?.kind === 'string' ? error.kind : 'session-ended') as 'session-ended' });
        }
      });
    },
  };
}
