// The worker side of proc-thread.ts: the /proc walk (proc-scan.ts) with blocking reads, one batch per message,
// keeping its caches (argv, symlinks, mappings) and the executable pins between batches; time comes with each batch.

import { parentPort, workerData } from 'node:worker_threads';
import { SYNC_PROC_FS } from './proc-fs.js';
import { createScanContext, scanBatch } from './proc-scan.js';
import type { WorkerBatch, WorkerReady, WorkerSetup } from './proc-thread.js';
import { failed, type IdentityResult } from './source.js';

const setup = workerData as WorkerSetup;
let clock = 0;
const ctx = createScanContext({ root: setup.procRoot, fs: SYNC_PROC_FS, skipPids: setup.skipPids, now: () => clock });

parentPort?.on('message', (batch: WorkerBatch) => {
  clock = batch.now;
  void scanBatch(ctx, batch.requests)
    .catch((err: unknown): IdentityResult[] => batch.requests.map(() => failed('proc-unavailable', err instanceof Error ? err.message : String(err))))
    .then((results) => parentPort?.postMessage({ id: batch.id, results }));
});
parentPort?.postMessage({ ready: true } satisfies WorkerReady);
