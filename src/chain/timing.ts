// What the chain measures while it decides and waits: seconds since a reading of the injected clock, and decide()
// with its duration recorded (the one place an adapter or stage times a decision).

import { decide } from '../policy/decide.js';
import type { Decision, EgressIntent, Policy } from '../policy/types.js';
import type { Observer } from '../telemetry/metrics.js';

/** Seconds since `start` (a `now()` reading), recorded on `observer`. */
export function observeSince(metrics: { readonly now: () => number }, observer: Observer, start: number): void {
  observer.observe((metrics.now() - start) / 1000);
}

/** decide() (or `how`, a memo of it) with its duration recorded on `metrics.decisionSeconds`. */
export function timedDecide(
  metrics: { readonly now: () => number; readonly decisionSeconds: Observer },
  policy: Policy,
  intent: EgressIntent,
  how: (policy: Policy, intent: EgressIntent) => Decision = decide,
): Decision {
  const started = metrics.now();
  const decision = how(policy, intent);
  observeSince(metrics, metrics.decisionSeconds, started);
  return decision;
}
