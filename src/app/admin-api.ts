// The boundary's admin API beside /healthz, /readyz and /metrics: GET /v1/explain (policy explain --json against the
// policy in force) and GET /v1/denials (the recent-denials ring, each with its smallest allowing entry), for loopback
// callers only. Answers are values; the admin listener (telemetry/admin.ts) owns the HTTP. Never echoes a query value.

import type { BinaryIdentityMode } from '../identity/source.js';
import type { PermanentCheck } from '../net/destination.js';
import type { ErrorCode } from '../shared/errors.js';
import { classifyAddress } from '../net/address.js';
import { type Explanation, explainIntent, explanationJson } from '../policy/explain.js';
import type { PolicyStore } from '../policy/store.js';
import type { PolicyTexts } from '../policy/texts.js';
import type { EgressIntent, Policy } from '../policy/types.js';
import { intentFromTarget } from '../proxy/explain-target.js';
import type { AdminAnswer, AdminCaller, AdminRoute } from '../telemetry/admin.js';
import { type DenialRecord, type DenialRing, LAST_PARAMETER_RULE, MAX_DENIALS_PER_ANSWER, parseLastParameter } from '../telemetry/denials.js';
import { replayTarget } from '../telemetry/replay.js';

export const EXPLAIN_PATH = '/v1/explain';
export const DENIALS_PATH = '/v1/denials';
/** Longest `url` parameter accepted: the proxy's own request-target limit plus a scheme and authority. */
const MAX_EXPLAIN_URL_CHARS = 4_400;
const ADMIN_REQUEST_INVALID: ErrorCode = 'ADMIN_REQUEST_INVALID';
const DNS_HINT = 'a DNS refusal names no port; explain host:PORT (or a URL) to see what would allow connecting';

interface AdminApiDeps {
  readonly store: Pick<PolicyStore, 'current'>;
  readonly texts: Pick<PolicyTexts, 'textFor'>;
  readonly ring: DenialRing;
  /** The proxy's always-blocked check (net/destination.ts permanentRefusal on this run's switches). */
  readonly permanent: PermanentCheck;
  /** The run's --binary-identity: explain checks binaries as the proxy does. */
  readonly binaryIdentity: BinaryIdentityMode;
}

const ADMIN_LOOPBACK_ONLY: ErrorCode = 'ADMIN_LOOPBACK_ONLY';

/**
 * Explain and denials tell how the policy is built and what the workload tried: the agent in the pod reads them on
 * 127.0.0.1, while the pod's admin port also faces Prometheus and the kubelet (docs/kubernetes.md#the-admin-port).
 * A TCP peer on loopback is inside the pod's network namespace: replies to a loopback address never leave it.
 */
function refusedCaller(caller: AdminCaller): AdminAnswer | undefined {
  if (caller.address !== undefined && classifyAddress(caller.address).class === 'loopback') return undefined;
  return {
    status: 403,
    body: {
      error: ADMIN_LOOPBACK_ONLY,
      message: 'answered to loopback clients only: ask from inside the pod (127.0.0.1), or read denials from the supervisor at /v1/sandboxes/<id>/denials',
    },
  };
}

function invalid(parameter: string, message: string): AdminAnswer {
  return { status: 400, body: { error: ADMIN_REQUEST_INVALID, parameter, message } };
}

function only(query: URLSearchParams, name: string): { ok: true; value: string | undefined } | { ok: false; answer: AdminAnswer } {
  const values = query.getAll(name);
  if (values.length > 1) return { ok: false, answer: invalid(name, `${name} may be given once`) };
  return { ok: true, value: values[0] };
}

function stamp(policy: Policy): { generation: number; policyHash: string } {
  return { generation: policy.generation, policyHash: policy.hash };
}

function explain(deps: AdminApiDeps, policy: Policy, intent: EgressIntent): Explanation {
  return explainIntent(policy, deps.texts.textFor(policy.hash), intent, deps.permanent);
}

/** GET /v1/explain?url=...&method=...[&binary=...]: the `policy explain --json` object plus generation and hash. */
export function explainRoute(deps: AdminApiDeps): AdminRoute {
  return {
    path: EXPLAIN_PATH,
    answer(query, caller) {
      const refused = refusedCaller(caller);
      if (refused !== undefined) return refused;
      const unknown = [...new Set(query.keys())].find((k) => k !== 'url' && k !== 'method' && k !== 'binary');
      if (unknown !== undefined) return invalid(unknown.slice(0, 64), 'only url, method and binary are understood');
      const url = only(query, 'url');
      const method = only(query, 'method');
      const binary = only(query, 'binary');
      if (!url.ok) return url.answer;
      if (!method.ok) return method.answer;
      if (!binary.ok) return binary.answer;
      if (url.value === undefined || url.value === '') return invalid('url', 'url is required: https://host[:port]/path or host:port');
      if (url.value.length > MAX_EXPLAIN_URL_CHARS) return invalid('url', `url is longer than ${MAX_EXPLAIN_URL_CHARS} characters`);
      const parsed = intentFromTarget(url.value, { method: method.value, binary: binary.value, binaryIdentity: deps.binaryIdentity });
      // The message quotes the method or binary as given, never the url (its query may hold anything).
      if (!parsed.ok) return invalid(parsed.field === 'target' ? 'url' : parsed.field, parsed.message);
      const policy = deps.store.current();
      return { status: 200, body: { ...explanationJson(explain(deps, policy, parsed.intent)), ...stamp(policy) } };
    },
  };
}

/** GET /v1/denials?last=N: the newest N denials (telemetry/denials.ts parseLastParameter; the ring caps N). */
export function denialsRoute(deps: AdminApiDeps): AdminRoute {
  return {
    path: DENIALS_PATH,
    answer(query, caller) {
      const refused = refusedCaller(caller);
      if (refused !== undefined) return refused;
      const n = parseLastParameter(query.getAll('last'));
      if (n === undefined) return invalid('last', LAST_PARAMETER_RULE);
      const policy = deps.store.current();
      const denials = deps.ring.recent(n).map((d) => withSuggestion(deps, policy, d));
      return { status: 200, body: { ...stamp(policy), total: deps.ring.total(), limit: MAX_DENIALS_PER_ANSWER, denials } };
    },
  };
}

/** A denial as listed: its record, and what explain says now about the same question (against the policy in force). */
function withSuggestion(deps: AdminApiDeps, policy: Policy, denial: DenialRecord): Record<string, unknown> {
  const { replay, ...shown } = denial;
  if (replay === undefined) return { ...shown, suggestion: null, hint: denial.adapter === 'dns' ? DNS_HINT : 'the event carries no replay fields' };
  const { target, method } = replayTarget(replay);
  const parsed = intentFromTarget(target, { method, binary: replay.binary, binaryIdentity: deps.binaryIdentity });
  if (!parsed.ok) return { ...shown, suggestion: null, hint: `cannot be replayed: ${parsed.message}` };
  const explained = explanationJson(explain(deps, policy, parsed.intent));
  return {
    ...shown,
    // `now` is what explain answers today: a later policy may already allow what was denied then.
    now: { verdict: explained.verdict, reason: explained.reason },
    suggestion: typeof explained.suggestion === 'string' ? explained.suggestion : null,
    ...(typeof explained.hint === 'string' ? { hint: explained.hint } : {}),
  };
}
