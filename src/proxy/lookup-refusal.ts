// The proxy's answer when the lookup gate keeps a destination's name from the upstream resolver
// (docs/dns.md#the-lookup-gate): the JSON denial, and what the one decision event records of it.

import { KNOWN_NAME_MS, type LookupRefusal } from '../net/lookup-gate.js';
import type { NextStep } from '../policy/suggest.js';
import { type Denial, denial } from './deny.js';
import { type Outcome, settle } from './events.js';

/** Settles `o` as refused by the gate (reason lookup-rate-limited or lookup-tunnel-suspected) and returns the denial to send. */
export function refuseLookup(o: Outcome, target: string, refusal: LookupRefusal): Denial {
  const answer = lookupRefusedDenial(target, refusal);
  o.engine = 'dns';
  o.extra = { ...o.extra, lookup_base: refusal.base, ...(refusal.signals.length === 0 ? {} : { signals: refusal.signals }) };
  const reason = refusal.refused === 'rate-limited' ? 'lookup-rate-limited' : 'lookup-tunnel-suspected';
  const under = refusal.base === '' ? 'a hostless endpoint' : `*.${refusal.base}`;
  settle(o, 'deny', reason, `${refusal.refused === 'rate-limited' ? 'new-name budget spent' : 'tunnelling-shaped name'} under ${under}: not resolved`, answer.status);
  return answer;
}

/**
 * docs/dns.md#the-lookup-gate: the name was not sent upstream. Over the new-name budget: 429 with Retry-After, the
 * workload may ask again then. A tunnelling-shaped name in enforce mode: 403, asking again gets the same answer.
 * Neither is a policy denial, so no entry is suggested.
 */
function lookupRefusedDenial(target: string, refusal: LookupRefusal): Denial {
  const under = refusal.base === '' ? 'a hostless endpoint' : `*.${refusal.base}`;
  if (refusal.refused === 'rate-limited') {
    const seconds = Math.max(1, Math.ceil(refusal.retryAfterMs / 1_000));
    const { perSecond, burst } = refusal.limits;
    const retry: NextStep = {
      kind: 'retry_later',
      message:
        `retry in ${seconds} s: boundary sends at most ${perSecond} new names a second (burst ${burst}) under wildcard entries such as ${under} ` +
        `to the upstream resolver, from policy DNS and the proxy together; names resolved in the last ${KNOWN_NAME_MS / 1_000} s and names a policy lists exactly are not counted`,
    };
    const fields = { detail: `${target}: too many new names under ${under}`, reason: 'lookup-rate-limited', retry_after_seconds: seconds, next_steps: [retry] };
    return { ...denial(429, 'lookup_rate_limited', fields, `: new-name lookup limit for ${target}`), retryAfterSeconds: seconds };
  }
  const signals = refusal.signals.join(', ');
  const stop: NextStep = {
    kind: 'not_allowable',
    message:
      `${refusal.name} looks like encoded data under ${under} (${signals}); boundary does not resolve such names under wildcard entries, ` +
      'and asking again gets the same answer. Use the service\'s ordinary host names; a name a policy lists exactly is not screened',
  };
  return denial(
    403,
    'lookup_tunnel_suspected',
    { detail: `${target}: tunnelling-shaped name under ${under}`, reason: 'lookup-tunnel-suspected', signals: refusal.signals, next_steps: [stop] },
    `: tunnelling-shaped name ${target}`,
  );
}

