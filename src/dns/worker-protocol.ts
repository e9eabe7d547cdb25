// The messages between policy DNS's main thread (dns/workers.ts) and its replay workers (dns/replay-worker.ts), and
// the clock both read deadlines on. Types and two small constants; no state.

import type { BucketLimits } from '../net/token-bucket.js';
import type { Rcode } from './answer.js';

/** `--dns-workers` at most: more threads than this only contend for the same cores. */
export const MAX_DNS_WORKERS = 16;
/** How often a worker reports the answers it replayed (counted into events and metrics by the main thread). */
export const DNS_WORKER_REPORT_INTERVAL_MS = 100;

export interface WorkerSetup {
  readonly host: string;
  readonly port: number;
  readonly family: 4 | 6;
  /** One Int32: the epoch, bumped by the main thread before any change to what a worker may replay. */
  readonly epoch: SharedArrayBuffer;
  /** Answers a worker keeps (its own bound; the main thread hands them over again on a miss). */
  readonly maxEntries: number;
  /**
   * The refused-name bucket (net/token-bucket.ts createSharedTokenBucket, on sharedClock) and its limits, once policy
   * DNS shares it: a worker then replays refusals too, each taking from it first. Without it refusals are passed on.
   */
  readonly refusals?: { readonly state: SharedArrayBuffer; readonly limits: BucketLimits };
  /**
   * The source ports of boundary's own upstream queries in flight (dns/own-queries.ts sharedPorts): a query from one
   * is passed to the main thread, which recognises boundary's own query come back, and never replayed.
   */
  readonly ownPorts?: SharedArrayBuffer;
}

export type ToWorker =
  | {
      readonly t: 'entry';
      readonly slot: number;
      readonly name: string;
      readonly wire: Uint8Array;
      readonly rcode: Rcode;
      readonly ttlOffset: number;
      /** A policy refusal: replayed only while the refused-name bucket admits it. */
      readonly denied: boolean;
      /** On sharedClock()'s timeline; Infinity while the epoch lasts. */
      readonly deadline: number;
      readonly epoch: number;
      readonly id: number;
    }
  /** Report now, then answer `synced`: the main thread then holds every count of replays made before it asked. */
  | { readonly t: 'sync'; readonly seq: number }
  | { readonly t: 'close' };

export type FromWorker =
  | { readonly t: 'listening' }
  | { readonly t: 'failed'; readonly message: string; readonly code: string }
  | { readonly t: 'query'; readonly message: Uint8Array; readonly ip: string; readonly port: number }
  | {
      readonly t: 'counts';
      readonly counts: readonly { readonly id: number; readonly count: number; readonly ip: string; readonly port: number }[];
      /** Refusals answered REFUSED over the refused-name bucket since the last report, and the first one's name. */
      readonly overLimit: number;
      readonly overLimitName: string | undefined;
    }
  | { readonly t: 'synced'; readonly seq: number }
  | { readonly t: 'closed' };

/**
 * Milliseconds on a timeline every thread of the process shares (each thread's performance.now() starts at its own
 * timeOrigin). Only differences are taken: how long an answer the main thread handed over has left to live.
 */
export function sharedClock(): number {
  return performance.timeOrigin + performance.now();
}
