// The proxy's answer when the lookup gate keeps a destination's name from the upstream resolver
// (docs/dns.md#the-lookup-gate): the JSON denial and the refusal the chain ends with.

import type { Refusal } from './stage.js';
import { KNOWN_NAME_MS, type LookupRefusal } from '../net/lookup-gate.js';
import type { NextStep } from '../policy/suggest.js';
import { type Denial, denial } from './denials.js';

/** The refusal for a name the gate kept back (reason lookup-rate-limited or lookup-tunnel-suspected). */
export function lookupRefused(target: string, refusal: LookupRefusal): Refusal {
  const under = refusal.base === '' ? 'a hostless endpoint' : `*.${refusal.base}`;
  const limited = refusal.refused === 'rate-limited';
  const answer = limited ? rateLimitedDenial(target, under, refusal) : tunnelDenial(target, under, refusal);
  const why = limited ? 'new-name budget spent' : 'tunnelling-shaped name';
  const reason = limited ? 'lookup-rate-limited' : 'lookup-tunnel-suspected';
  return { verdict: 'deny', reason, detail: `${why} under ${under}: not resolved`, status: answer.status, denial: answer, finding: undefined };
}

/** What the decision event records of a gate refusal: the wildcard base, and the signals of a tunnelling-shaped name. */
export function lookupFields(refusal: LookupRefusal): Record<string, unknown> {
  return refusal.refused === 'rate-limited' ? { lookup_base: refusal.base } : { lookup_base: refusal.base, signals: refusal.signals };
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
