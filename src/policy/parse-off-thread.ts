// Policy reloads that never stall request serving: parse-worker.ts runs the YAML parse and every check on a
// worker thread, and the compiled Policy (matchers are functions and cannot cross threads) is rebuilt here
// from the worker's plain data (plain-policy.ts) in slices of POLICY_COMPILE_SLICE_MS, serving in between.
// A policy below OFF_THREAD_MIN_BYTES is parsed in place: its parse blocks less than booting a worker costs.

import { Worker } from 'node:worker_threads';
import { BoundaryError, type ErrorCode, type Issue } from '../shared/errors.js';
import type { Steps } from './compile.js';
import { type ParseOptions, parsePolicy } from './parse.js';
import { type PlainPolicy, plainPolicySteps } from './plain-policy.js';
import type { Policy } from './types.js';

/**
 * Longest run of compile work between two event-loop turns. Requests and /readyz wait at most about this long
 * behind a reload; shorter slices only add scheduling overhead to the reload itself.
 */
export const POLICY_COMPILE_SLICE_MS = 10;

/**
 * Texts shorter than this are parsed on the event loop: below it the parse is over before a worker would
 * have booted. Measured on the production build, 2 noisy cores, medians of 11: a worker costs 115-120 ms of
 * wall and 135-145 ms of CPU for a 215-byte policy (a policy reloaded every second kept half a core busy),
 * against 1.5-2 ms inline. The bound is the loop block a reload may cost, 50 ms: inline, a 16.5 KB policy
 * blocks 30-39 ms, a 33 KB one 50-54 ms and a 65 KB one 90-105 ms (through the worker a 65 KB policy costs
 * 670-720 ms of CPU, as the main thread compiles the plain data again, but it never blocks the loop).
 */
export const OFF_THREAD_MIN_BYTES = 16 * 1024;

export interface WorkerRequest {
  readonly id: number;
  readonly text: string;
  readonly source: string | undefined;
  readonly middlewareServices: readonly string[] | undefined;
}

export type WorkerReply =
  | { readonly id: number; readonly ok: true; readonly data: PlainPolicy; readonly warnings: readonly Issue[]; readonly hash: string }
  | { readonly id: number; readonly ok: false; readonly code: ErrorCode; readonly message: string; readonly issues: readonly Issue[] };

export interface PolicyCompiler {
  /** parsePolicy's result and errors, blocking the event loop for at most a slice (or a small text's parse). */
  parse(text: string, options?: ParseOptions): Promise<Policy>;
  /** Stops the worker; a parse in flight rejects. Idempotent. */
  close(): Promise<void>;
}

export interface PolicyCompilerOptions {
  /** Starts the parse worker (default: parse-worker.ts); tests count workers through it. */
  readonly spawn?: () => Worker;
}

export function createPolicyCompiler(options: PolicyCompilerOptions = {}): PolicyCompiler {
  const spawn = options.spawn ?? spawnParseWorker;
  let worker: Worker | undefined;
  let nextId = 1;
  const pending = new Map<number, { resolve: (reply: WorkerReply) => void; reject: (err: Error) => void }>();

  function failAll(err: Error): void {
    for (const waiter of pending.values()) waiter.reject(err);
    pending.clear();
    worker = undefined;
  }

  // Started per reload and stopped once idle: reloads are rare, and a parse at the limit leaves a heap of hundreds
  // of MB in the worker that only ending the thread gives back. Booting one costs about 100 ms, off the loop.
  function started(): Worker {
    if (worker !== undefined) return worker;
    const w = spawn();
    w.on('message', (reply: WorkerReply) => {
      const waiter = pending.get(reply.id);
      pending.delete(reply.id);
      waiter?.resolve(reply);
      if (pending.size === 0 && worker === w) {
        worker = undefined;
        void w.terminate();
      }
    });
    w.on('error', (err) => failAll(err));
    w.on('exit', (code) => {
      if (worker === w) failAll(new Error(`policy parse worker exited with code ${code}`));
    });
    worker = w;
    return w;
  }

  return {
    async parse(text, options = {}) {
      if (Buffer.byteLength(text, 'utf8') < OFF_THREAD_MIN_BYTES) return parsePolicy(text, options);
      const id = nextId++;
      const w = started();
      const reply = await new Promise<WorkerReply>((resolve, reject) => {
        pending.set(id, { resolve, reject });
        w.postMessage({ id, text, source: options.source, middlewareServices: options.middlewareServices } satisfies WorkerRequest);
      });
      if (!reply.ok) throw new BoundaryError(reply.code, reply.message, { issues: reply.issues });
      const policy = await runInSlices(plainPolicySteps(reply.data, reply.warnings, options.source, options.middlewareServices));
      // The same parser read the same data on both threads; a difference is a bug, and fails closed.
      if (policy.hash !== reply.hash) throw new BoundaryError('POLICY_INVALID', 'policy compiled differently on the main thread; not applied');
      return policy;
    },
    async close() {
      const w = worker;
      worker = undefined;
      failAll(new Error('policy compiler closed'));
      await w?.terminate();
    },
  };
}

/** Runs steps, giving the event loop a turn whenever a slice has run POLICY_COMPILE_SLICE_MS. */
export async function runInSlices<T>(steps: Steps<T>): Promise<T> {
  let sliceStart = performance.now();
  for (;;) {
    const next = steps.next();
    if (next.done === true) return next.value;
    if (performance.now() - sliceStart >= POLICY_COMPILE_SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
}

/** In production the worker is dist/policy/parse-worker.js; under tsx (tests) its source needs tsx's hooks. */
export function spawnParseWorker(): Worker {
  const fromSource = import.meta.url.endsWith('.ts');
  const entry = new URL(`./parse-worker.${fromSource ? 'ts' : 'js'}`, import.meta.url);
  if (!fromSource) return new Worker(entry);
  // tsx's loader hooks do not reach a worker's entry through execArgv on Node 20; register them inside.
  const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(boot, { eval: true });
}
