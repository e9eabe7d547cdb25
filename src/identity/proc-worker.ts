// The worker side of proc-thread.ts: the /proc walk (proc-scan.ts) with blocking reads, one batch per message,
// keeping its process and symlink caches between batches. Holds no other state; time comes with each batch.

import { parentPort, workerData } from 'node:worker_threads';
import { SYNC_PROC_FS } from './proc-fs.js';
import { type ScanContext, scanBatch } from './proc-scan.js';
import type { WorkerBatch, WorkerSetup } from './proc-thread.js';
import { failed, type IdentityResult } from './source.js';

const setup = workerData as WorkerSetup;
let clock = 0;
const ctx: ScanContext = {
  root: setup.procRoot,
  fs: SYNC_PROC_FS,
  processes: new Map(),
  links: { entries: new Map(), now: () => clock },
  skip: new Set(setup.skipPids),
};

parentPort?.on('message', (batch: WorkerBatch) => {
  clock = batch.now;
  void scanBatch(ctx, batch.requests)
    .catch((err: unknown): IdentityResult[] => batch.requests.map(() => failed('proc-unavailable', err instanceof Error ? err.message : String(err))))
    .then((results) => parentPort?.postMessage({ id: batch.id, results }));
});
