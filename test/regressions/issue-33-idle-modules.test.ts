// Regression of issue 33, "a 48 MiB sidecar": module source and compiled code stay in the V8 heap, so what the run
// command's module graph loads before any policy, credentials file or request asks for it is idle heap in every
// sandbox. `boundary run` imported the credentials file reader, and with it the yaml library (~70 modules), even
// without --credentials. This loads the run command and the composition root in a fresh node, as `boundary run`
// does at start, and lists the packages that came with them: those loaded on first use must not be among them.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../harness/cli-boundary.js';

/** Packages boundary loads on first use only (a credentials file, a GraphQL or MCP rule, SigV4, the supervisor's store, a secret scanner's own patterns, a middleware service). */
const LOADED_ON_DEMAND = ['yaml', 'pg', 'graphql', '@modelcontextprotocol/sdk', '@smithy/signature-v4', '@smithy/hash-node', 'redos-detector', '@grpc/grpc-js'];
const CHILD_TIMEOUT_MS = 60_000;

/** Every package in node's module cache after importing the run command; ESM imports of CommonJS packages land there too. */
const LIST_PACKAGES = `
await import('./src/app/cli/run.ts');
await import('./src/app/boundary.ts');
const { createRequire } = await import('node:module');
const cache = createRequire(import.meta.url).cache;
const names = new Set();
for (const file of Object.keys(cache)) {
  const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(file);
  if (m) names.add(m[1]);
}
process.stdout.write(JSON.stringify([...names]));
`;

describe('issue 33: what boundary run loads at start', () => {
  it('loads none of the packages that are needed only on first use', { timeout: CHILD_TIMEOUT_MS }, async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', LIST_PACKAGES], {
      cwd: PROJECT_ROOT,
      timeout: CHILD_TIMEOUT_MS,
    });
    const loaded = JSON.parse(stdout) as string[];
    assert.ok(loaded.includes('pino') && loaded.includes('prom-client'), `the listing sees packages at all: ${loaded.join(', ')}`);
    for (const name of LOADED_ON_DEMAND) assert.ok(!loaded.includes(name), `${name} is loaded at start`);
  });
});
