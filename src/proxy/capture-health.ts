// Whether capture can bind at all: a bind failure that says every capture listener would fail (the synthetic
// range is not local, or privileged ports without the capability) becomes a readiness reason, and a later bind
// that proves otherwise clears it. Owns only throwaway probe sockets; knows nothing of mappings or policy.

import { createServer } from 'node:net';
import { formatAuthority } from '../net/host.js';
import type { Logger } from '../telemetry/logger.js';

/** Binds below this port need CAP_NET_BIND_SERVICE (Linux's default ip_unprivileged_port_start). */
const PRIVILEGED_PORT_LIMIT = 1_024;

// Only errors that condemn the whole range: EADDRINUSE is one port's problem and says nothing about capture.
const SYSTEMIC: Readonly<Record<string, string>> = {
  EADDRNOTAVAIL: 'is the synthetic range routed to lo? run boundary init-netns',
  EACCES: `ports below ${PRIVILEGED_PORT_LIMIT} need CAP_NET_BIND_SERVICE or the pod sysctl net.ipv4.ip_unprivileged_port_start=0`,
};

interface Failure {
  readonly code: string;
  readonly ip: string;
  readonly port: number;
}

interface CaptureHealth {
  /** A capture listener (or the probe) failed to bind (ip, port); port 0 is the probe's ephemeral port. */
  failed(err: NodeJS.ErrnoException, ip: string, port: number): void;
  bound(ip: string, port: number): void;
  /** Binds and closes (ip, ephemeral port): tells whether the range is local before any name was asked. */
  probe(ip: string): Promise<void>;
  /** Probes again while the range was found not local, so readiness recovers once the route exists. */
  recheck(): void;
  /** `capture-unavailable: ...` for /readyz, or undefined. */
  problem(): string | undefined;
}

export function createCaptureHealth(options: { readonly logger: Logger }): CaptureHealth {
  const { logger } = options;
  let failure: Failure | undefined;
  let probing: Promise<void> | undefined;

  function describe(f: Failure): string {
    const where = f.port === 0 ? f.ip : formatAuthority(f.ip, f.port);
    return `capture-unavailable: ${f.code} ${where} (${SYSTEMIC[f.code] ?? 'capture listeners cannot bind'})`;
  }

  const health: CaptureHealth = {
    failed(err, ip, port) {
      const code = err.code ?? '';
      if (SYSTEMIC[code] === undefined) return;
      const first = failure === undefined;
      // A re-probe keeps the listener's reason: it names the port that actually failed.
      if (port === 0 && failure?.code === code) return;
      failure = { code, ip, port };
      if (first) logger.error({ code, ip, port }, `transparent capture unavailable; /readyz reports it: ${describe(failure)}`);
    },
    bound(_ip, port) {
      if (failure === undefined) return;
      // Any bind proves the range local; only a privileged port proves the capability.
      if (failure.code === 'EACCES' && (port === 0 || port >= PRIVILEGED_PORT_LIMIT)) return;
      logger.info({ cleared: describe(failure) }, 'transparent capture listeners bind again');
      failure = undefined;
    },
    probe(ip) {
      probing ??= new Promise<void>((resolve) => {
        const server = createServer();
        server.once('error', (err: NodeJS.ErrnoException) => {
          health.failed(err, ip, 0);
          resolve();
        });
        server.listen({ host: ip, port: 0, exclusive: true }, () => {
          health.bound(ip, 0);
          server.close(() => resolve());
        });
      }).finally(() => {
        probing = undefined;
      });
      return probing;
    },
    recheck() {
      if (failure?.code === 'EADDRNOTAVAIL' && probing === undefined) void health.probe(failure.ip);
    },
    problem: () => (failure === undefined ? undefined : describe(failure)),
  };
  return health;
}
