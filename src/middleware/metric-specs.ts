// The metrics of external middleware services (src/middleware/service.ts records them): each call boundary makes to
// a service, by call and result, and how long it took. Declares; never records. app/metric-catalogue.ts lists them.

import { CONNECT_BUCKETS } from '../telemetry/metric-buckets.js';
import type { MetricSpec } from '../telemetry/metrics.js';

/** The unary calls boundary makes (a response's stream is not counted here). */
export const MIDDLEWARE_CALLS = ['describe', 'validate_config', 'http_request', 'websocket_message'] as const;
export type MiddlewareCallLabel = (typeof MIDDLEWARE_CALLS)[number];
/** `ok`: the service answered (whatever it decided); otherwise why the call failed. */
export const MIDDLEWARE_CALL_RESULTS = ['ok', 'timeout', 'unavailable'] as const;

export const MIDDLEWARE_METRICS = {
  boundary_middleware_service_calls_total: {
    name: 'boundary_middleware_service_calls_total',
    type: 'counter',
    unit: '',
    help: 'Calls to external middleware services by call and result (ok: answered, whatever it decided)',
    labels: { call: MIDDLEWARE_CALLS, result: MIDDLEWARE_CALL_RESULTS },
    scope: 'boundary',
  },
  boundary_middleware_service_call_seconds: {
    name: 'boundary_middleware_service_call_seconds',
    type: 'histogram',
    unit: 'seconds',
    help: 'Time from a call to an external middleware service to its answer, timeout or failure',
    labels: { call: MIDDLEWARE_CALLS },
    buckets: CONNECT_BUCKETS,
    scope: 'boundary',
  },
} as const satisfies Record<string, MetricSpec>;
