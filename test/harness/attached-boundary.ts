// An attached-mode boundary for tests: createBoundary with the attached config, a TLS dir from the test PKI,
// an injected control lookup and fast control tuning, with its control states observable; plus the REST
// policy and the admin GET the attached-mode tests share.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import type { Boundary } from '../../src/app/boundary-types.js';
import { createBoundary } from '../../src/app/boundary.js';
import type { ControlState } from '../../src/control/client.js';
import type { ControlLookup } from '../../src/control/dial.js';
import type { Timers } from '../../src/shared/timers.js';
import type { AuditSink } from '../../src/telemetry/event.js';
import { attachedConfig } from './attached-config.js';
import type { TestPki } from './certs.js';
import { type TestSupervisor, WAIT_TIMEOUT_MS } from './control.js';
import { type FakeAnswer, fakeResolver } from './fake-resolver.js';
import { type LogSink, logSink } from './log-sink.js';
import { waiterList } from './waiters.js';

export function restPolicy(port: number, path: string): string {
  return `version: 1
network_policies:
  api:
    endpoints:
      - host: api.example.test
        port: ${port}
        protocol: rest
        enforcement: enforce
        rules:
          - allow: { method: GET, path: "${path}" }
    binaries: [{ path: "/**" }]
`;
}

export async function writeTlsDir(pki: TestPki): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'boundary-tls-'));
  await writeFile(join(dir, 'ca.pem'), pki.ca.certPem);
  await writeFile(join(dir, 'cert.pem'), pki.client.certPem);
  await writeFile(join(dir, 'key.pem'), pki.client.keyPem, { mode: 0o600 });
  return dir;
}

export async function httpGet(port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  // Bounded, so a listener that never answers fails the test with its path instead of holding it to --test-timeout.
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers, signal: AbortSignal.timeout(WAIT_TIMEOUT_MS) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export interface AttachedBoundary {
  readonly boundary: Boundary;
  readonly log: LogSink;
  readonly proxyPort: number;
  readonly adminPort: number;
  /** Its state directory: the interception CA's certificate is `ca.pem` there. */
  readonly stateDir: string;
  readonly lookups: string[];
  state(): ControlState | undefined;
  waitState(predicate: (state: ControlState) => boolean, timeoutMs?: number): Promise<ControlState>;
  get(path: string): Promise<{ status: number; body: Record<string, unknown> }>;
  close(): Promise<void>;
}

export async function startAttached(
  pki: TestPki,
  sup: Pick<TestSupervisor, 'port'>,
  /** `log` replaces the JSON log sink; `audit` (events for both formats, say) replaces its audit sink; `names`: what the fake
   *  upstream resolver answers (default: api.example.test only). */
  /** `config`: more Config fields (upstreamCa, say); `timers`: what token grants schedule on. */
  options: {
    supervisor?: string;
    lookup?: ControlLookup;
    log?: LogSink;
    audit?: AuditSink;
    names?: Readonly<Record<string, FakeAnswer>>;
    config?: Readonly<Record<string, unknown>>;
    timers?: Timers;
  } = {},
): Promise<AttachedBoundary> {
  const tlsDir = await writeTlsDir(pki);
  const stateDir = await mkdtemp(join(tmpdir(), 'boundary-state-'));
  const log = options.log ?? logSink();
  const lookups: string[] = [];
  let last: ControlState | undefined;
  const states = waiterList<ControlState>({ record: false });
  const config = attachedConfig({
    // A name, so the injected lookup is exercised; the supervisor's certificate names localhost.
    supervisor: options.supervisor ?? `localhost:${sup.port()}`,
    tlsDir,
    sandboxId: pki.sandboxId,
    stateDir,
    extra: { unsafeAllowLoopbackUpstream: true, ...options.config },
  });

  const boundary = createBoundary(config, {
    resolver: fakeResolver(options.names ?? { 'api.example.test': ['127.0.0.1'] }),
    now: Date.now,
    logger: log.logger,
    audit: options.audit ?? log.sink,
    registry: new Registry(),
    controlLookup:
      options.lookup ??
      (async (host) => {
        lookups.push(host);
        return host === 'localhost' ? ['127.0.0.1'] : [];
      }),
    version: '0.1.0-test',
    ...(options.timers === undefined ? {} : { timers: options.timers }),
    controlTuning: {
      tuning: { backoff: { baseMs: 20, capMs: 200 }, timeouts: { eventsFlushMs: 50 } },
      onState(state) {
        last = state;
        states.push(state);
      },
    },
  });
  await boundary.start();
  return {
    boundary,
    log,
    proxyPort: boundary.proxyAddress().port,
    adminPort: boundary.adminAddress().port,
    stateDir,
    lookups,
    state: () => last,
    waitState(predicate, timeoutMs = WAIT_TIMEOUT_MS) {
      if (last !== undefined && predicate(last)) return Promise.resolve(last);
      return states.waitFor(predicate, timeoutMs, 'control state', () => `phase ${last?.phase}, last error ${last?.lastError?.message}`);
    },
    get: (path) => httpGet(boundary.adminAddress().port, path),
    async close() {
      await boundary.close();
      await rm(tlsDir, { recursive: true, force: true });
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}
