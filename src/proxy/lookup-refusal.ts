// The proxy's answer when the lookup gate keeps a destination's name from the upstream resolver
// (docs/dns.md#the-lookup-gate): the JSON denial, and what the one decision event records of it.

import { KNOWN_NAME_MS, type LookupRefusal } from '../net/lookup-gate.js';
import type { NextStep } from '../policy/suggest.js';
import { type Denial, denial } from './deny.js';
import { type Outcome, settle } from './events.js';

/** Settles `o` as refused by the gate (reason lookup-rate-limited or lookup-tunnel-suspected) and returns the denial to send. */
export function refuseLookup(o: Outcome, target: string, refusal: LookupRefusal): Denial {
  const under = refusal.base === '' ? 'a hostless endpoint' : `*.${refusal.base}`;
  const limited = refusal.refused === 'rate-limited';
  const answer = limited ? rateLimitedDenial(target, under, refusal) : tunnelDenial(target, under, refusal);
  o.engine = 'dns';
  o.extra = { ...o.extra, lookup_base: refusal.base, ...(limited ? {} : { signals: refusal.signals }) };
  const why = limited ? 'new-name budget spent' : 'tunnelling-shaped name';
  settle(o, 'deny', limited ? 'lookup-rate-limited' : 'lookup-tunnel-suspected', `${why} under ${under}: not resolved`, answer.status);
  return answer;
}

// docs/dns.md#the-lookup-gate: the name was not sent upstream. Neither answer is a policy denial, so neither suggests
// an entry: over the budget the workload may ask again later (429, Retry-After); a tunnelling-shaped name gets the
// same answer every time (403).

function rateLimitedDenial(target: string, under: string, refusal: LookupRefusal): Denial {
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

function tunnelDenial(target: string, under: string, refusal: LookupRefusal): Denial {
  const stop: NextStep = {
    kind: 'not_allowable',
    message:
      `${refusal.name} looks like encoded data under ${under} (${refusal.signals.join(', ')}); boundary does not resolve such names under ` +
      "wildcard entries, and asking again gets the same answer. Use the service's ordinary host names; a name a policy lists exactly is not screened",
  };
  const fields = { detail: `${target}: tunnelling-shaped name under ${under}`, reason: 'lookup-tunnel-suspected', signals: refusal.signals, next_steps: [stop] };
  return denial(403, 'lookup_tunnel_suspected', fields, `: tunnelling-shaped name ${target}`);
}
