// What the chain measures while it decides and waits: seconds since a reading of the injected clock, and decide()
// with its duration recorded (the one place an adapter or stage times a decision).

import { decide } from '../policy/decide.js';
import type { Decision, EgressIntent, Policy } from '../policy/types.js';
import type { Observer } from '../telemetry/metrics.js';

/** Seconds since `start` (a `now()` reading), recorded on `observer`. */
export function observeSince(metrics: { readonly now: () => number }, observer: Observer, start: number): void {
  observer.observe((metrics.now() - start) / 1000);
}

/** decide(), each call's duration recorded on `metrics.decisionSeconds`: what the chain's memos decide with. */
export function timedDecide(metrics: { readonly now: () => number; readonly decisionSeconds: Observer }): (policy: Policy, intent: EgressIntent) => Decision {
  return (policy, intent) => {
    const started = metrics.now();
    const decision = decide(policy, intent);
    observeSince(metrics, metrics.decisionSeconds, started);
    return decision;
  };
}
