// Regression of issue 33, "a 48 MiB sidecar": module source and compiled code stay in the V8 heap, so what the run
// command's module graph loads before any policy, credentials file or request asks for it is idle heap in every
// sandbox. `boundary run` imported the credentials file reader, and with it the yaml library (~70 modules), even
// without --credentials. This loads the run command and the composition root in a fresh node, as `boundary run`
// does at start, and lists the packages that came with them: those loaded on first use must not be among them.
// On the image's Node 22, an ESM import of node:http filled in its namespace, whose lazy getters loaded undici and
// node:http2 (about 10 MiB of RSS that nothing in boundary uses): the second case runs the same start on that Node.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../harness/cli-boundary.js';
import { imageNode } from '../harness/image-node.js';

/** Packages boundary loads on first use only (a credentials file, a GraphQL or MCP rule, SigV4, the supervisor's store, a secret scanner's own patterns, a middleware service). */
const LOADED_ON_DEMAND = ['yaml', 'pg', 'graphql', '@modelcontextprotocol/sdk', '@smithy/signature-v4', '@smithy/hash-node', 'redos-detector', '@grpc/grpc-js'];
const CHILD_TIMEOUT_MS = 60_000;
/** Node's own modules none of boundary uses, which an ESM import of node:http brought along on Node 22. */
const UNUSED_BUILTINS = ['internal/deps/undici/undici', 'http2'];
/** The image's Node may be fetched from the npm registry first. */
const IMAGE_NODE_TIMEOUT_MS = 300_000;

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

/** Node's own modules loaded after the same imports, by name (`NativeModule http2`, ...). */
const LIST_BUILTINS = `
await import('./src/app/cli/run.ts');
await import('./src/app/boundary.ts');
process.stdout.write(JSON.stringify(process.moduleLoadList.filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice('NativeModule '.length))));
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

  it('loads neither undici nor node:http2 on the image\'s Node', { timeout: IMAGE_NODE_TIMEOUT_MS }, async () => {
    const node = await imageNode(join(PROJECT_ROOT, 'Dockerfile'));
    const { stdout } = await promisify(execFile)(node.path, ['--import', 'tsx', '--input-type=module', '-e', LIST_BUILTINS], {
      cwd: PROJECT_ROOT,
      timeout: CHILD_TIMEOUT_MS,
    });
    const loaded = JSON.parse(stdout) as string[];
    assert.ok(loaded.includes('http') && loaded.includes('dgram'), `the listing sees node's modules at all (${node.version}): ${loaded.length}`);
    for (const name of UNUSED_BUILTINS) assert.ok(!loaded.includes(name), `${name} is loaded at start on ${node.version}`);
  });
});
