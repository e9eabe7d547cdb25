// The control channel's metrics, with their label vocabularies: the channel's state, reconnects and forwarded events
// (counted by app/boundary-metrics.ts) and the client certificate's expiry (tls-source.ts). Declares; never records.

import type { MetricSpec } from '../telemetry/metrics.js';
import type { ControlPhase } from './client.js';
import { CONTROL_ERROR_KINDS } from './messages.js';

const NONE = {} as const;

/** client.ts ControlPhase, listed here so this file does not load the control client. */
export const CONTROL_STATES = ['idle', 'connecting', 'attached', 'waiting', 'superseded', 'closed'] as const satisfies readonly ControlPhase[];
type MissingControlState = Exclude<ControlPhase, (typeof CONTROL_STATES)[number]>;
// A new phase that is not listed above fails to compile here.
const CONTROL_STATES_COMPLETE: MissingControlState extends never ? true : never = true;
void CONTROL_STATES_COMPLETE;

export const CONTROL_METRICS = {
  boundary_control_state: {
    name: 'boundary_control_state',
    type: 'gauge',
    unit: '',
    help: 'Attached mode: 1 for the control channel state now, 0 for the others',
    labels: { state: CONTROL_STATES },
    scope: 'boundary',
  },
  boundary_control_reconnects_total: {
    name: 'boundary_control_reconnects_total',
    type: 'counter',
    unit: '',
    help: 'Attached mode: failed attaches and ended sessions by error kind',
    labels: { kind: [...CONTROL_ERROR_KINDS, 'session-ended'] },
    scope: 'boundary',
  },
  boundary_control_events_total: {
    name: 'boundary_control_events_total',
    type: 'counter',
    unit: '',
    help: 'Attached mode: audit events forwarded to the supervisor or dropped (buffer full, send failed)',
    labels: { outcome: ['forwarded', 'dropped'] },
    scope: 'boundary',
  },
  boundary_control_certificate_expiry_seconds: {
    name: 'boundary_control_certificate_expiry_seconds',
    type: 'gauge',
    unit: 'seconds',
    help: 'notAfter of the control client certificate in use, as unix time in seconds',
    labels: NONE,
    scope: 'boundary',
  },
} as const satisfies Record<string, MetricSpec>;
