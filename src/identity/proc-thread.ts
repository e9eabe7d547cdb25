// The /proc walk on its own thread (proc-worker.ts): the walk's blocking reads never hold up the event loop of
// boundary or of the identity server. One batch at a time (proc-source.ts queues the rest); a worker that
// dies fails its batch and is started again for the next one. Started on the first batch, so a boundary
// whose policy never needs an identity never pays for the thread.

import { Worker } from 'node:worker_threads';
import type { IdentityResult, LookupRequest } from './source.js';

export interface WorkerBatch {
  readonly id: number;
  /** The injected clock's reading: the worker has no clock of its own (symlink cache ages). */
  readonly now: number;
  readonly requests: readonly LookupRequest[];
}

export interface WorkerAnswer {
  readonly id: number;
  readonly results: readonly IdentityResult[];
}

/** The worker's first message: its modules are loaded and it takes batches. */
export interface WorkerReady {
  readonly ready: true;
}

export interface WorkerSetup {
  readonly procRoot: string;
  readonly skipPids: readonly number[];
}

/** A worker not running this long after it was started is ended (its batch fails `source-unavailable`). */
export const IDENTITY_WORKER_BOOT_TIMEOUT_MS = 30_000;

/** Runs one batch; rejects when the thread failed (the source answers its lookups `source-unavailable`). */
export interface Scanner {
  scan(requests: readonly LookupRequest[], now: number): Promise<readonly IdentityResult[]>;
  /**
   * Settles once the thread runs (started now if it was not): a lookup's timeout counts from then, so the one-time
   * start (slow on a loaded node) never fails the first connections.
   */
  started(): Promise<void>;
  close(): Promise<void>;
}

/** In production the worker is dist/identity/proc-worker.js; under tsx (tests) its source needs tsx's hooks. */
function spawnProcWorker(setup: WorkerSetup): Worker {
  const fromSource = import.meta.url.endsWith('.ts');
  const entry = new URL(`./proc-worker.${fromSource ? 'ts' : 'js'}`, import.meta.url);
  if (!fromSource) return new Worker(entry, { workerData: setup });
  // tsx's loader hooks do not reach a worker's entry through execArgv on Node 20; register them inside.
  const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(boot, { eval: true, workerData: setup });
}

export function threadScanner(setup: WorkerSetup): Scanner {
  let worker: Worker | undefined;
  let online: Promise<void> = Promise.resolve();
  let nextId = 1;
  let waiting: { id: number; resolve: (a: WorkerAnswer) => void; reject: (err: Error) => void } | undefined;

  function fail(err: Error): void {
    worker = undefined;
    const w = waiting;
    waiting = undefined;
    w?.reject(err);
  }

  function running(): Worker {
    if (worker !== undefined) return worker;
    const w = spawnProcWorker(setup);
    // An idle worker does not keep the process alive; close() ends it.
    w.unref();
    let ready = (): void => undefined;
    online = new Promise<void>((resolve) => {
      const boot = setTimeout(() => void w.terminate(), IDENTITY_WORKER_BOOT_TIMEOUT_MS);
      boot.unref();
      ready = () => {
        clearTimeout(boot);
        resolve();
      };
      // Failing to start settles it too: the batch then fails at once rather than at its timeout.
      w.once('exit', ready);
    });
    w.on('message', (answer: WorkerAnswer | WorkerReady) => {
      if ('ready' in answer) {
        ready();
        return;
      }
      if (waiting?.id !== answer.id) return;
      const found = waiting;
      waiting = undefined;
      found.resolve(answer);
    });
    w.on('error', (err) => {
      if (worker === w) fail(err);
    });
    w.on('exit', (code) => {
      if (worker === w) fail(new Error(`identity worker exited with code ${code}`));
    });
    worker = w;
    return w;
  }

  return {
    async scan(requests, now) {
      const id = nextId++;
      const w = running();
      const answer = await new Promise<WorkerAnswer>((resolve, reject) => {
        waiting = { id, resolve, reject };
        w.postMessage({ id, now, requests } satisfies WorkerBatch);
      });
      return answer.results;
    },
    started() {
      running();
      return online;
    },
    async close() {
      const w = worker;
      fail(new Error('identity worker closed'));
      await w?.terminate();
    },
  };
}
