// What a stage is and how a list of them runs (docs/architecture.md#the-runner): each stage reads the request so far
// and answers continue, answer (a refusal that ends the chain) or wait (a promise of either). The runner stays in the
// turn the request arrived in until a stage must wait, so a request whose answers are all at hand makes no promise.

import type { Denial } from './denials.js';
import type { ReasonCode } from './events.js';

/** A refusal that ends the chain: what the adapter renders, and the result the decision event records. */
export interface Refusal {
  readonly verdict: 'deny' | 'fail';
  readonly reason: ReasonCode;
  /** One human sentence for the event; never a query string or a credential. */
  readonly detail: string;
  /** The status the client is answered with; undefined when nothing can be sent (a transparent connection). */
  readonly status: number | undefined;
  /** The JSON denial to render; absent: a bare status. */
  readonly denial: Denial | undefined;
  /** A FINDING to emit beside the decision event. */
  readonly finding: string | undefined;
}

/** Continue with the next stage. */
export const CONTINUE = undefined;

export type StageResult = Refusal | undefined | Promise<Refusal | undefined>;

/** One stage of a chain over requests of type R. `run` must not throw for a refusal: it returns one. */
export interface Stage<R> {
  readonly name: string;
  run(request: R): StageResult;
}

/** A refusal; `denial` absent is a bare status. */
export function refusal(
  verdict: 'deny' | 'fail',
  reason: ReasonCode,
  detail: string,
  status: number | undefined,
  extra?: { readonly denial?: Denial | undefined; readonly finding?: string | undefined },
): Refusal {
  return { verdict, reason, detail, status, denial: extra?.denial, finding: extra?.finding };
}

/** A policy refusal with its JSON denial: `deny`, or `fail` for a 5xx. */
export function denied(denial: Denial, reason: ReasonCode, detail: string, finding?: string): Refusal {
  return { verdict: denial.status >= 500 ? 'fail' : 'deny', reason, detail, status: denial.status, denial, finding };
}

function isPromise(value: StageResult): value is Promise<Refusal | undefined> {
  return value !== undefined && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * Runs `stages` from `from` on: the first refusal, or undefined when every stage continued. Synchronous until a
 * stage returns a promise; the rest then runs when it settles. A stage that throws rejects (or throws, in the same
 * turn): the adapter answers that as a failure.
 */
export function runStages<R>(stages: readonly Stage<R>[], request: R, from = 0): Refusal | undefined | Promise<Refusal | undefined> {
  for (let i = from; i < stages.length; i++) {
    const result = (stages[i] as Stage<R>).run(request);
    if (result === undefined) continue;
    if (!isPromise(result)) return result;
    return resumeAfter(result, stages, request, i + 1);
  }
  return undefined;
}

// Apart from runStages: a closure there makes V8 allocate a context for its captured variables on every call and
// every loop turn, whether or not any stage waits.
function resumeAfter<R>(waiting: Promise<Refusal | undefined>, stages: readonly Stage<R>[], request: R, next: number): Promise<Refusal | undefined> {
  return waiting.then((waited) => (waited === undefined ? runStages(stages, request, next) : waited));
}
