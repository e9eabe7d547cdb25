// Token grant metrics (docs/credentials.md#token-grants): requests to token endpoints by outcome, and how long the
// current token of each grant is still sent. Labelled by provider and key, never by a value. Declares; never records.

import type { MetricSpec } from '../telemetry/metrics.js';
import { TOKEN_FAILURES } from './token-client.js';

const GRANT_LABELS = { provider: 'credentials file provider name', key: 'the grant key (its env name)' } as const;

export const GRANT_METRICS = {
  boundary_token_grant_requests_total: {
    name: 'boundary_token_grant_requests_total',
    type: 'counter',
    unit: '',
    help: 'Token endpoint requests by token grant and outcome (ok, or why it failed)',
    labels: { outcome: ['ok', ...TOKEN_FAILURES] },
    runtimeLabels: GRANT_LABELS,
    scope: 'boundary',
  },
  boundary_token_grant_usable_seconds: {
    name: 'boundary_token_grant_usable_seconds',
    type: 'gauge',
    unit: 'seconds',
    help: 'Seconds the current token of each token grant is still sent (its expiry less the skew); 0 without a valid token',
    labels: {},
    runtimeLabels: GRANT_LABELS,
    scope: 'boundary',
  },
} as const satisfies Record<string, MetricSpec>;
