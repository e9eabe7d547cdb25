// The label vocabularies and histogram buckets of the metric catalogue (src/metric-catalogue.ts): each label's
// closed value set, drawn from the part that owns it, and the buckets measured for each histogram. Declares; never records.
// At the top of src/ for the catalogue's reason: it names closed sets owned by policy/, proxy/, dns/ and control/.

import type { ControlPhase } from './control/client.js';
import { RCODES } from './dns/answer.js';
import { DNS_DECISION_REASONS } from './policy/types.js';
import { REASON_CODES } from './proxy/events.js';

/** Policy names (network_policies keys) labelled one by one; the rest of a larger policy is counted as `other`. */
export const MAX_POLICY_LABELS = 64;
/** The `policy` label of a decision that no policy entry made (no endpoint matched, a parse refusal, ...). */
export const NO_POLICY_LABEL = 'none';

/** Adapters as metric labels: capture is `transparent` here, as the operator knows it. */
export const METRIC_ADAPTERS = ['forward', 'connect', 'l7', 'transparent', 'dns'] as const;
export type MetricAdapter = (typeof METRIC_ADAPTERS)[number];
/** proxy/events.ts REASON_CODES once each (a reason shared by decide() and the proxy is listed in both sets). */
export const PROXY_REASONS = [...new Set(REASON_CODES)];
/** Every reason a refusal can carry: the proxy's and policy DNS's, without the allow reasons. */
export const DENIAL_REASONS = [...new Set([...REASON_CODES, ...DNS_DECISION_REASONS, 'invalid-name'])].filter((reason) => !reason.endsWith('-allowed'));
export const DNS_RCODE_LABELS = Object.keys(RCODES) as (keyof typeof RCODES)[];
/** Query types a workload asks for in practice; any other is counted as `other`. */
export const DNS_QTYPE_LABELS = ['A', 'AAAA', 'CNAME', 'HTTPS', 'SVCB', 'MX', 'TXT', 'NS', 'SOA', 'PTR', 'SRV', 'CAA', 'ANY'] as const;
export const DNS_OUTCOMES = [
  'mapped',
  'empty',
  'refused',
  'nxdomain',
  'not-implemented',
  'malformed',
  'upstream-failed',
  'no-valid-address',
  'pool-exhausted',
  'stale-generation',
  'mapping-rate-limited',
  'mapping-limit',
] as const;
export type DnsOutcomeLabel = (typeof DNS_OUTCOMES)[number];
/** control/client.ts ControlPhase, listed here so this file does not load the control client. */
export const CONTROL_STATES = ['idle', 'connecting', 'attached', 'waiting', 'superseded', 'closed'] as const satisfies readonly ControlPhase[];
type MissingControlState = Exclude<ControlPhase, (typeof CONTROL_STATES)[number]>;
// A new phase that is not listed above fails to compile here.
const CONTROL_STATES_COMPLETE: MissingControlState extends never ? true : never = true;
void CONTROL_STATES_COMPLETE;

const ms = (n: number): number => n / 1000;
/** Buckets from loopback measurements plus real-network headroom (docs/metrics.md#buckets). */
export const DECISION_BUCKETS = [ms(0.002), ms(0.005), ms(0.01), ms(0.025), ms(0.05), ms(0.1), ms(0.25), ms(1)];
export const CONNECT_BUCKETS = [ms(0.1), ms(0.25), ms(0.5), ms(1), ms(2.5), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 2.5, 10];
export const FIRST_BYTE_BUCKETS = [ms(0.25), ms(0.5), ms(1), ms(2.5), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 2.5, 5, 10, 30];
export const TLS_BUCKETS = [ms(0.5), ms(1), ms(2), ms(3), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 2.5];
export const DNS_BUCKETS = [ms(0.025), ms(0.05), ms(0.1), ms(0.25), ms(0.5), ms(1), ms(2.5), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 5];
export const BYTE_BUCKETS = [0, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216, 67_108_864];
