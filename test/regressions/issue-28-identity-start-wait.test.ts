// Issue 28 (binary identity through the identity server): boundary waits for an identity server that is still
// starting. The wait held no reference on the event loop, so a boundary whose server was not up yet simply ended,
// exit 0 and no word, right after writing its trust bundle (seen as the pod tests' "boundary exited (0)").

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const SOURCE = fileURLToPath(new URL('../../src/identity/socket-source.ts', import.meta.url));

it('issue 28: start() keeps the process alive while it waits for an identity server that is not up yet', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-identity-wait-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const socketPath = join(dir, 'identity.sock');
  // The child has nothing else alive: only start()'s own wait can keep it running until the server appears.
  const script = `
    const { createSocketIdentitySource } = await import(${JSON.stringify(SOURCE)});
    const source = createSocketIdentitySource({ socketPath: ${JSON.stringify(socketPath)} });
    process.stdout.write('waiting\\n');
    await source.start();
    process.stdout.write(source.problem() === undefined ? 'connected\\n' : 'gave up\\n');
    await source.close();
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  await new Promise<void>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      if (out.includes('waiting\n')) resolve();
    });
  });
  // The server comes up only once the child is waiting.
  const server = createServer((socket) => socket.on('error', () => undefined));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  assert.equal(await exited, 0);
  assert.match(out, /connected\n/, 'start() returned once the server was there, not because the process ran out of work');
});
