// The reference supervisor's own metrics (its serving certificate). Declares; never records.

import type { MetricSpec } from '../telemetry/metrics.js';

const NONE = {} as const;

export const SUPERVISOR_METRICS = {
  boundary_supervisor_certificate_expiry_seconds: {
    name: 'boundary_supervisor_certificate_expiry_seconds',
    type: 'gauge',
    unit: 'seconds',
    help: 'notAfter of the supervisor serving certificate in use, as unix time in seconds',
    labels: NONE,
    scope: 'supervisor',
  },
} as const satisfies Record<string, MetricSpec>;
