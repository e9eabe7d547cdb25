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
  // The client keeps running totals; the counter is moved up to them at each scrape.
  const recorded = { forwarded: 0, dropped: 0 };
  createCounter(registry, METRICS.boundary_control_events_total, {
    collect(counter) {
      const events = options.control()?.events;
      if (events === undefined) return;
      if (events.sent > recorded.forwarded) counter.inc({ outcome: 'forwarded' }, events.sent - recorded.forwarded);
      if (events.dropped > recorded.dropped) counter.inc({ outcome: 'dropped' }, events.dropped - recorded.dropped);
      recorded.forwarded = Math.max(recorded.forwarded, events.sent);
      recorded.dropped = Math.max(recorded.dropped, events.dropped);
    },
  });
  let droppedRecorded = 0;
  createCounter(registry, METRICS.boundary_log_lines_dropped_total, {
    collect(counter) {
      const dropped = options.logLinesDropped();
      if (dropped > droppedRecorded) counter.inc({}, dropped - droppedRecorded);
      droppedRecorded = Math.max(droppedRecorded, dropped);
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
