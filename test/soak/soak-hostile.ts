// What every hostile class of the soak shares: a tally of attempts, refusals with the expected code and anything
// else (kept as short samples for the report), and a loop that repeats one bounded wave until the phase ends.

import { performance } from 'node:perf_hooks';
import { setTimeout as pause } from 'node:timers/promises';
import { withinDeadline } from '../harness/waiters.js';

/**
 * No single hostile attempt may take longer: the slowest by design, a slowloris head, is answered within the
 * headers timeout plus a few seconds. One that hangs is recorded as such, and its wave goes on.
 */
export const ATTEMPT_DEADLINE_MS = 30_000;
/** Unexpected outcomes kept verbatim per class; the count goes on past this. */
const MAX_SAMPLES_KEPT = 5;

export interface HostileTally {
  readonly name: string;
  /** The refusal this class must meet, e.g. `431` or `close 1009`. */
  readonly expected: string;
  attempts: number;
  refused: number;
  readonly unexpected: string[];
  unexpectedCount: number;
  /** Reported beside the counts (e.g. dnsperf's figures); never asserted on. */
  note: string;
}

export function hostileTally(name: string, expected: string): HostileTally {
  return { name, expected, attempts: 0, refused: 0, unexpected: [], unexpectedCount: 0, note: '' };
}

/** One attempt's outcome: refused as expected, or the sample saying what happened instead. */
export function recordOutcome(tally: HostileTally, refusedAsExpected: boolean, sample: string): void {
  tally.attempts++;
  if (refusedAsExpected) {
    tally.refused++;
    return;
  }
  tally.unexpectedCount++;
  if (tally.unexpected.length < MAX_SAMPLES_KEPT) tally.unexpected.push(sample.slice(0, 200));
}

/** Records `attempt`'s verdict, or its rejection (or its hanging past ATTEMPT_DEADLINE_MS) as an unexpected outcome. */
export async function attemptInto(tally: HostileTally, attempt: () => Promise<{ ok: boolean; sample: string }>): Promise<void> {
  try {
    const { ok, sample } = await withinDeadline(attempt(), `${tally.name} attempt`, ATTEMPT_DEADLINE_MS);
    recordOutcome(tally, ok, sample);
  } catch (err) {
    recordOutcome(tally, false, `error: ${(err as Error).message.split('\n')[0] ?? ''}`);
  }
}

export interface Phase {
  /** True until the hostile phase ends. */
  active(): boolean;
}

/**
 * Repeats `wave` (bounded work that resolves) while the phase is active, starting one every `intervalMs` or
 * after the last one finished, whichever is later: a wave never overlaps the next, so each class holds at most
 * one wave's sockets at a time.
 */
export async function repeatWaves(phase: Phase, intervalMs: number, wave: () => Promise<void>): Promise<void> {
  // Bounded by the phase: active() turns false at its end, and each wave is bounded by its own timeouts.
  while (phase.active()) {
    const started = performance.now();
    await wave();
    const wait = started + intervalMs - performance.now();
    // Pacing, not waiting for an event: the offered hostile rate stays fixed.
    if (wait > 0 && phase.active()) await pause(wait);
  }
}
