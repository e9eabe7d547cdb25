// attachedConfig(): the Config of an in-process attached boundary for tests: every listener on port 0, a
// synthetic range inside 127.0.0.0/8 (capture binds without a route, so /readyz has no capture reason), a
// short close grace. Callers name the supervisor, the TLS folder and the identity.
import { type Config, parseConfig } from '../../src/app/config.js';
import { TEST_CLOSE_GRACE_MS, TEST_SYNTHETIC_CIDR } from './boundary.js';

export function attachedConfig(options: {
  readonly supervisor: string;
  readonly tlsDir: string;
  readonly sandboxId: string;
  readonly stateDir: string;
  readonly instanceId?: string;
  readonly extra?: Readonly<Record<string, unknown>>;
}): Config {
  return parseConfig({
    proxyListen: '127.0.0.1:0',
    adminListen: '127.0.0.1:0',
    dnsListen: '127.0.0.1:0',
    syntheticCidr: TEST_SYNTHETIC_CIDR,
    stateDir: options.stateDir,
    supervisor: options.supervisor,
    tlsDir: options.tlsDir,
    sandboxId: options.sandboxId,
    instanceId: options.instanceId ?? 'pod-1',
    limits: { closeGraceMs: TEST_CLOSE_GRACE_MS },
    ...options.extra,
  });
}
