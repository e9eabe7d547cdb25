// Every metric boundary and the reference supervisor expose, in one list: each part declares its own next to the
// code that records them (proxy/, dns/, control/, supervisor/, middleware/ metric-specs.ts), and the boundary-wide ones are here.
// The metric table of docs/metrics.md is generated from this list (scripts/metrics-table.ts). Declares; never records.

import { CONTROL_METRICS } from '../control/metric-specs.js';
import { DNS_METRICS } from '../dns/metric-specs.js';
import { GRANT_METRICS } from '../grants/metric-specs.js';
import { MIDDLEWARE_METRICS } from '../middleware/metric-specs.js';
import { PROXY_METRICS } from '../proxy/metric-specs.js';
import { SUPERVISOR_METRICS } from '../supervisor/metric-specs.js';
import type { MetricSpec } from '../telemetry/metrics.js';

const NONE = {} as const;

/** The boundary as a whole: its build, readiness and policy loads. */
const BOUNDARY_METRICS = {
  boundary_build_info: {
    name: 'boundary_build_info',
    type: 'gauge',
    unit: 'info',
    help: 'Always 1; the labels name the boundary version (package.json) and the Node.js version',
    labels: NONE,
    runtimeLabels: { version: 'package.json version', node: 'process.version' },
    scope: 'boundary',
  },
  boundary_ready: {
    name: 'boundary_ready',
    type: 'gauge',
    unit: '',
    help: '1 while /readyz answers 200, else 0',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_policy_generation: {
    name: 'boundary_policy_generation',
    type: 'gauge',
    unit: '',
    help: 'Generation of the policy in force (0: none loaded yet)',
    labels: NONE,
    scope: 'boundary',
  },
  boundary_policy_reloads_total: {
    name: 'boundary_policy_reloads_total',
    type: 'counter',
    unit: '',
    help: 'Policy loads by source (file, control) and outcome (loaded, refused)',
    labels: { source: ['file', 'control'], outcome: ['loaded', 'refused'] },
    scope: 'boundary',
  },
  boundary_log_lines_dropped_total: {
    name: 'boundary_log_lines_dropped_total',
    type: 'counter',
    unit: '',
    help: "Log lines (audit events among them) dropped because stdout's reader was more than 16 MiB behind (LOG_LINES_DROPPED)",
    labels: NONE,
    scope: 'boundary',
  },
} as const satisfies Record<string, MetricSpec>;

export const METRICS = {
  ...BOUNDARY_METRICS,
  ...PROXY_METRICS,
  ...DNS_METRICS,
  ...CONTROL_METRICS,
  ...GRANT_METRICS,
  ...SUPERVISOR_METRICS,
  ...MIDDLEWARE_METRICS,
} as const satisfies Record<string, MetricSpec>;

export type MetricName = keyof typeof METRICS;

/** Every entry's key equals its name: one spelling, checked by the catalogue test. */
export function catalogueEntries(): readonly MetricSpec[] {
  return Object.values(METRICS);
}
