// A test supervisor on its own worker thread: in production the supervisor is a separate process, and a
// scale test that runs thousands of boundaries in this thread should not also pay for its side of every handshake.
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { SupervisorConfig } from '../../src/supervisor/supervisor.js';
import type { TestPki } from './certs.js';

export interface SupervisorThreadStart {
  readonly pki: { readonly ca: { readonly certPem: string }; readonly server: { readonly certPem: string; readonly keyPem: string } };
  readonly policies: Record<string, string>;
  readonly config: Partial<SupervisorConfig>;
}

export type SupervisorThreadRequest = { readonly id: number } & (
  | { readonly op: 'port' | 'restart' | 'attached' | 'close' }
  | { readonly op: 'write-policy'; readonly name: string; readonly text: string }
);

type Op = SupervisorThreadRequest['op'];

export interface SupervisorThread {
  readonly port: number;
  /** Closes and starts a fresh supervisor on the same port, as harness/control.ts restart(). */
  restart(): Promise<void>;
  writePolicy(name: string, text: string): Promise<void>;
  /** Rows of the supervisor's table that are attached. */
  attachedCount(): Promise<number>;
  close(): Promise<void>;
}

// tsx's loader hooks do not reach a worker's entry through execArgv on Node 20; register them inside.
const ENTRY = new URL('./supervisor-thread-main.ts', import.meta.url).href;
const BOOT = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(ENTRY)}); })`;

export async function startSupervisorThread(
  pki: TestPki,
  options: { policies: Record<string, string>; config?: Partial<SupervisorConfig> },
): Promise<SupervisorThread> {
  const workerData: SupervisorThreadStart = {
    pki: { ca: { certPem: pki.ca.certPem }, server: { certPem: pki.server.certPem, keyPem: pki.server.keyPem } },
    policies: options.policies,
    config: options.config ?? {},
  };
  const worker = new Worker(BOOT, { eval: true, workerData });
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  let nextId = 1;
  let failed: Error | undefined;
  worker.on('message', (reply: { id: number; value?: unknown; error?: string }) => {
    const waiter = pending.get(reply.id);
    pending.delete(reply.id);
    if (reply.error === undefined) waiter?.resolve(reply.value);
    else waiter?.reject(new Error(`supervisor thread: ${reply.error}`));
  });
  worker.on('error', (err) => {
    failed = err;
    for (const waiter of pending.values()) waiter.reject(err);
    pending.clear();
  });
  const ask = (request: { op: Op; name?: string; text?: string }): Promise<unknown> => {
    if (failed !== undefined) return Promise.reject(failed);
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, ...request });
    });
  };
  const [ready] = (await Promise.race([once(worker, 'message'), once(worker, 'error').then(([err]) => Promise.reject(err))])) as [{ value: unknown }];
  if (ready.value !== 'ready') throw new Error('supervisor thread did not start');
  const port = Number(await ask({ op: 'port' }));
  let closed = false;
  return {
    port,
    restart: async () => {
      await ask({ op: 'restart' });
    },
    writePolicy: async (name, text) => {
      await ask({ op: 'write-policy', name, text });
    },
    attachedCount: async () => Number(await ask({ op: 'attached' })),
    async close() {
      if (closed) return;
      closed = true;
      await ask({ op: 'close' }).catch(() => undefined);
      await worker.terminate();
    },
  };
}
