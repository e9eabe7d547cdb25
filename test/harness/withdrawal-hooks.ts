// Shared setup of the withdrawal-hook tests: a capturing logger (and the check that no bearer token reached
// any line it wrote), withdrawals and memory stores holding one, shell scripts in temp dirs, recording loopback
// servers and a hook runner with short retries.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { createServer as createHttpServer, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { createHookRunner, type HookRunner } from '../../src/supervisor/hook-runner.js';
import { createMemoryStore } from '../../src/supervisor/store/memory.js';
import type { StoredWithdrawal, SupervisorStore } from '../../src/supervisor/store/store.js';
import { createLogger, type Logger } from '../../src/telemetry/logger.js';
import { waiterList } from './waiters.js';

export const WAIT_MS = 10_000;
const RETRY_BASE_MS = 5;
const POLL_MS = 50;

// Every line any logger in this file wrote: the tokens must appear in none of them.
const allLines: string[] = [];
const tokens: string[] = [];

export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly err?: string;
  readonly attempts?: number;
  readonly withdrawalId?: string;
  readonly nextAttemptAt?: string;
}

// As test/harness/control.ts quietLogger(), without importing the supervisor that module builds on.
export function captureLogger(): { logger: Logger; waitFor(predicate: (line: LogLine) => boolean, what: string): Promise<LogLine> } {
  const lines = waiterList<LogLine>();
  const logger = createLogger({
    format: 'json',
    level: 'debug',
    destination: {
      write: (line: string) => {
        allLines.push(line);
        lines.push(JSON.parse(line) as LogLine);
      },
    },
  });
  return { logger, waitFor: (predicate, what) => lines.waitFor(predicate, WAIT_MS, what) };
}

export function newToken(): string {
  const token = randomBytes(24).toString('base64url');
  tokens.push(token);
  return token;
}

export function withdrawal(overrides: Partial<StoredWithdrawal> = {}): StoredWithdrawal {
  return {
    id: 'w-1',
    sandboxId: 'sb-1',
    instanceId: 'sandbox-sb-1',
    reason: 'did not attach within the attach deadline (60 s)',
    at: Date.UTC(2025, 0, 2, 3, 4, 5),
    replicaId: 'r-1',
    hook: 'pending',
    attempts: 1,
    nextAttemptAt: null,
    lastError: null,
    deliveredAt: null,
    ...overrides,
  };
}

export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-hook-'));
  after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export async function script(dir: string, name: string, body: string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, `#!/bin/sh\n${body}\n`);
  await chmod(file, 0o755);
  return file;
}

export interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

export type Handler = (req: Received, res: ServerResponse) => void;

/** Listens on loopback port 0; `cleanup` registers the close (a suite's before hook passes its own list). */
export async function listen(server: ReturnType<typeof createHttpServer>, cleanup: (fn: () => Promise<void>) => void = after): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as AddressInfo).port;
}

/** A loopback server that records each request and answers with `handler` (default: 200). */
export function recorder(handler: Handler = (_req, res) => res.end('{}')) {
  const requests = waiterList<Received>();
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      requests.push(received);
      handler(received, res);
    });
  };
  return { requests, onRequest };
}

export async function startRunner(store: SupervisorStore, deliver: (w: StoredWithdrawal) => Promise<void>, logger: Logger): Promise<HookRunner> {
  const runner = createHookRunner({ store, deliver, now: Date.now, logger, pollMs: POLL_MS, retryBaseMs: RETRY_BASE_MS, retryMaxMs: 4 * RETRY_BASE_MS });
  after(() => runner.close());
  runner.start();
  return runner;
}

/** A memory store holding one pending withdrawal, claimed the way the supervisor claims it. */
export async function storeWithWithdrawal(instanceId: string): Promise<{ store: SupervisorStore; withdrawal: StoredWithdrawal }> {
  const store = createMemoryStore();
  await store.start();
  after(() => store.close());
  const at = Date.now();
  await store.expect('sb-1', instanceId, at - 1);
  const [claimed, ...rest] = await store.claimDue(at, 'r-1', true, () => 'did not attach within the attach deadline (1 s)');
  assert.equal(rest.length, 0);
  assert.ok(claimed !== undefined);
  return { store, withdrawal: claimed };
}

export async function storedWithdrawal(store: SupervisorStore, id: string): Promise<StoredWithdrawal> {
  const found = (await store.withdrawals()).find((w) => w.id === id);
  assert.ok(found !== undefined, `withdrawal ${id} is in the store`);
  return found;
}

/** Register with a file-level after(): fails if any line a captureLogger() wrote carries a token from newToken(). */
export function assertNoTokenLogged(): void {
  for (const token of tokens) {
    const leaked = allLines.filter((line) => line.includes(token));
    assert.deepEqual(leaked, [], 'no log line carries a bearer token');
  }
}
