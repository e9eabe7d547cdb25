// Worker-thread entry for supervisor-thread.ts: one test supervisor, driven by numbered requests.
import { parentPort, workerData } from 'node:worker_threads';
import type { TestPki } from './certs.js';
import { startTestSupervisor } from './control.js';
import type { SupervisorThreadRequest, SupervisorThreadStart } from './supervisor-thread.js';

const port = parentPort;
if (port === null) throw new Error('supervisor-thread-main.ts runs only as a worker thread');
const start = workerData as SupervisorThreadStart;
// startTestSupervisor reads only the PEMs of the CA and the server identity.
const sup = await startTestSupervisor(start.pki as TestPki, { policies: start.policies, config: start.config });
port.on('message', (request: SupervisorThreadRequest) => {
  const run = async (): Promise<unknown> => {
    switch (request.op) {
      case 'port':
        return sup.port();
      case 'restart':
        return sup.restart();
      case 'write-policy':
        return sup.writePolicy(request.name, request.text);
      case 'attached':
        return sup.supervisor.sandboxes().filter((row) => row.attached).length;
      case 'close':
        return sup.close();
    }
  };
  run().then(
    (value) => port.postMessage({ id: request.id, value }),
    (err: unknown) => port.postMessage({ id: request.id, error: String(err) }),
  );
});
port.postMessage({ id: 0, value: 'ready' });
