// Issue 29 (what boundary tells users is what it does): a Node agent on undici fetch saw only "Request was cancelled"
// when boundary refused its CONNECT. docs/agents.md gives a helper that reads boundary's answer; this runs that very
// snippet, taken out of the page, in a real node with the real undici against a real boundary.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { type RunningBoundary, startBoundary } from '../harness/boundary.js';
import { httpOrigin, type Origin } from '../harness/servers.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MARKER = '<!-- snippet: undici-connect-denial';
const CHILD_TIMEOUT_MS = 20_000;

/** The js block right after the marker in docs/agents.md. */
async function snippet(): Promise<string> {
  const page = await readFile(new URL('../../docs/agents.md', import.meta.url), 'utf8');
  const at = page.indexOf(MARKER);
  assert.ok(at >= 0, 'docs/agents.md keeps the snippet marker');
  const block = /```js\n([\s\S]*?)\n```/.exec(page.slice(at));
  assert.ok(block?.[1] !== undefined, 'a js block follows the marker');
  return block[1];
}

interface Outcome {
  readonly status?: number;
  readonly message?: string;
  readonly cause?: { status: number; reason: string; body: { error: string; check?: string; next_steps?: { kind: string }[] } };
}

/** Runs the snippet and one call of its helper in a child node (ESM from stdin, undici resolved from the checkout). */
function runHelper(code: string, proxyPort: number, url: string): Promise<Outcome> {
  const driver = `${code}
try {
  const res = await fetchThroughBoundary(${JSON.stringify(url)});
  console.log(JSON.stringify({ status: res.status }));
} catch (err) {
  console.log(JSON.stringify({ message: err.message, cause: err.cause }));
}
`;
  const proxy = `http://127.0.0.1:${proxyPort}`;
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HTTPS_PROXY: proxy, HTTP_PROXY: proxy, NO_PROXY: '' };
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, ['--input-type=module', '-'], { cwd: ROOT, env, timeout: CHILD_TIMEOUT_MS }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${err.message}\n${stderr}`));
      resolve(JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Outcome);
    });
    child.stdin?.end(driver);
  });
}

describe('issue 29: a Node agent on undici fetch reads why boundary refused its CONNECT (docs/agents.md)', () => {
  let origin: Origin;
  let b: RunningBoundary;
  let code: string;
  before(async () => {
    code = await snippet();
    origin = await httpOrigin();
    b = await startBoundary({
      policy: `version: 1
network_policies:
  api:
    endpoints:
      - { host: api.example.test, port: ${origin.port} }
    binaries: [{ path: "/**" }]
`,
    });
  });
  after(async () => {
    await b?.close();
    await origin?.close();
  });

  it('a name no entry lists: the error carries 403 policy_denied and the entry that would allow it', async () => {
    const out = await runHelper(code, b.proxyPort, 'https://denied.example.test/');
    assert.equal(out.cause?.status, 403);
    assert.equal(out.cause?.body.error, 'policy_denied');
    assert.ok(out.cause?.body.next_steps?.some((s) => s.kind === 'add_policy_entry'));
    assert.match(out.message ?? '', /^boundary refused denied\.example\.test: 403 /);
  });

  it('the metadata address: 403 ssrf_denied, permanent, no entry proposed', async () => {
    const out = await runHelper(code, b.proxyPort, 'https://169.254.169.254/latest/meta-data/');
    assert.equal(out.cause?.status, 403);
    assert.equal(out.cause?.body.error, 'ssrf_denied');
    assert.equal(out.cause?.body.check, 'always-blocked');
    assert.deepEqual(out.cause?.body.next_steps?.map((s) => s.kind), ['not_allowable']);
  });

  it('an allowed request is plain fetch', async () => {
    const out = await runHelper(code, b.proxyPort, `http://api.example.test:${origin.port}/`);
    assert.equal(out.status, 200);
  });
});
