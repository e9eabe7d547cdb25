// Drives test/harness/dns-workers-child.ts from a test: starts it on the image's Node (22: dgram reusePort), reads the
// port it listens on, then sends one command per line and reads each one-line JSON answer.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { PROJECT_ROOT } from './cli-boundary.js';
import { imageNode } from './image-node.js';

export interface WorkersChild {
  /** Policy DNS's port on 127.0.0.1, shared by the main thread and its two workers. */
  readonly port: number;
  ask(command: string): Promise<Record<string, unknown>>;
  /** Ends the child if it is still running (after `close`, it has ended itself). */
  kill(): Promise<void>;
}

/** undefined where the image's Node (the npm package node@22) cannot be installed. */
export async function startWorkersChild(): Promise<WorkersChild | undefined> {
  let node: string;
  try {
    node = (await imageNode(join(PROJECT_ROOT, 'Dockerfile'))).path;
  } catch {
    return undefined;
  }
  const child = spawn(node, ['--import', 'tsx', join(PROJECT_ROOT, 'test/harness/dns-workers-child.ts')], { cwd: PROJECT_ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  async function next(): Promise<Record<string, unknown>> {
    const line = await lines.next();
    if (line.done === true) throw new Error('the child ended');
    return JSON.parse(line.value) as Record<string, unknown>;
  }
  const kill = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGKILL');
    await once(child, 'exit');
  };
  try {
    const port = Number((await next()).port);
    return {
      port,
      ask(command) {
        child.stdin.write(`${command}\n`);
        return next();
      },
      kill,
    };
  } catch (err) {
    await kill();
    throw err;
  }
}
