// Regression of issue 15 (found by its soak): a refusal answered before the request body was read — 413
// credential_body_too_large on an endpoint with body rewrite — was written, and then the socket was closed
// with the body's bytes still arriving. The kernel answered them with a reset, and the client's kernel dropped
// the 413 before curl read it: curl reported "connection reset" instead of the refusal. The socket now
// half-closes and lingers, dropping what the client still sends (deny.ts lingerAfterAnswer).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { type CredentialStack, credentialStack, HOSTS, type Transport } from '../harness/credential-stack.js';
import { SUITE_TIMEOUT_MS } from '../harness/liveness.js';

const run = promisify(execFile);
/** Far past the 256 KiB rewrite buffer, so most of the body is still on its way when the 413 is written. */
const BODY_BYTES = 64 * 1024 * 1024;
/** Without the fix, most of these lost their answer to a reset. */
const ATTEMPTS = 8;

describe('issue 15: a refusal written before the body was read reaches the client', { timeout: SUITE_TIMEOUT_MS }, () => {
  let s: CredentialStack;
  let dir: string;

  before(async () => {
    s = await credentialStack({ values: { token: 'tok-15ea', query: 'q-15ea', basic: 'pw-15ea' } });
    dir = await mkdtemp(join(tmpdir(), 'boundary-issue-15-ea-'));
    await writeFile(join(dir, 'body'), Buffer.alloc(BODY_BYTES, 'x'));
    await writeFile(join(dir, 'ca.pem'), s.b.caPem as string);
  });

  after(async () => {
    await s?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  for (const transport of ['forward', 'connect'] as const satisfies readonly Transport[]) {
    it(`${transport}: curl uploading ${BODY_BYTES} bytes to a body-rewrite endpoint reads its 413, every time`, async () => {
      const port = s.portFor(HOSTS.rewrite, transport);
      const url = `${transport === 'forward' ? 'http' : 'https'}://${HOSTS.rewrite}:${port}/r/upload`;
      const answers: string[] = [];
      for (let i = 0; i < ATTEMPTS; i++) {
        const r = await run(
          'curl',
          ['-sS', '--max-time', '20', '-x', `http://127.0.0.1:${s.b.proxyPort}`, '--cacert', join(dir, 'ca.pem'),
            // No Expect: 100-continue, so the body follows the head at once, as most clients send it.
            '-H', 'Expect:', '-H', 'Transfer-Encoding: chunked', '-H', 'content-type: text/plain', '--data-binary', `@${join(dir, 'body')}`,
            '-w', '\n%{http_code}', url],
          { encoding: 'utf8' },
        ).then(
          (out) => out.stdout,
          (err: { stderr?: string }) => `curl failed: ${err.stderr ?? String(err)}`,
        );
        answers.push(r);
      }
      for (const answer of answers) {
        assert.match(answer, /"error":"credential_body_too_large"[\s\S]*\n413$/, answer);
      }
    });
  }
});
