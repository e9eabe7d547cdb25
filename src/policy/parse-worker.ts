// The worker side of parse-off-thread.ts: runs the whole parsePolicy (YAML, every check, V13) on its own thread
// and answers with plain data: the document as JS, the warnings and the hash, or the coded error. Holds no state.

import { parentPort } from 'node:worker_threads';
import { isBoundaryError } from '../shared/errors.js';
import { drain } from './compile.js';
import { openPolicy, readPolicySteps } from './parse.js';
import type { WorkerReply, WorkerRequest } from './parse-off-thread.js';
import { toPlainPolicy } from './plain-policy.js';
import { toPlain } from './yaml-source.js';

function answer(request: WorkerRequest): WorkerReply {
  try {
    const { ctx, contents } = openPolicy(request.text, {
      ...(request.source === undefined ? {} : { source: request.source }),
      ...(request.middlewareServices === undefined ? {} : { middlewareServices: request.middlewareServices }),
    });
    const policy = drain(readPolicySteps(ctx, contents, { checkAmbiguity: true }));
    // Aliases are already bounded by openPolicy; the main thread reads the expanded data.
    const data = toPlainPolicy(toPlain(contents));
    return { id: request.id, ok: true, data, warnings: policy.warnings, hash: policy.hash };
  } catch (err) {
    if (isBoundaryError(err)) return { id: request.id, ok: false, code: err.code, message: err.message, issues: err.issues };
    return { id: request.id, ok: false, code: 'POLICY_INVALID', message: err instanceof Error ? err.message : String(err), issues: [] };
  }
}

parentPort?.on('message', (request: WorkerRequest) => {
  parentPort?.postMessage(answer(request));
});
