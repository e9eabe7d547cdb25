// Whether capture can bind at all: a bind failure that says every capture listener would fail (the synthetic
// range is not local, or privileged ports without the capability) is logged once with what to run and becomes the
// problem readiness reports; a later bind that proves otherwise clears it. Owns only throwaway probe sockets.

import { createServer } from 'node:net';
import { formatAuthority } from '../net/host.js';
import type { Logger } from '../telemetry/logger.js';

/** Binds below this port need CAP_NET_BIND_SERVICE (Linux's default ip_unprivileged_port_start). */
const PRIVILEGED_PORT_LIMIT = 1_024;

// Only errors that condemn the whole range, each with what fixes it: EADDRINUSE is one port's problem.
const SYSTEMIC: Readonly<Record<string, (cidr: string) => string>> = {
  EADDRNOTAVAIL: (cidr) => `the synthetic range is not routed to lo: run 'ip route add local ${cidr} dev lo' as root, or boundary init-netns`,
  EACCES: () => `ports below ${PRIVILEGED_PORT_LIMIT} need CAP_NET_BIND_SERVICE or the pod sysctl net.ipv4.ip_unprivileged_port_start=0`,
};

interface Failure {
  readonly code: string;
  readonly ip: string;
  readonly port: number;
}

interface CaptureHealthOptions {
  readonly logger: Logger;
  /** `--synthetic-cidr`, named in the route to add. */
  readonly cidr: string;
  /** required: an unavailable capture keeps /readyz at 503 (logged as an error); optional: a warning. */
  readonly required: boolean;
}

interface CaptureHealth {
  /**
   * A capture listener (or the probe) failed to bind (ip, port); port 0 is the probe's ephemeral port. True when
   * the failure condemns every listener: it is logged here, once, so the listener need not log it again.
   */
  failed(err: NodeJS.ErrnoException, ip: string, port: number): boolean;
  bound(ip: string, port: number): void;
  /** Binds and closes (ip, ephemeral port): tells whether the range is local before any name was asked. */
  probe(ip: string): Promise<void>;
  /** Probes again while the range was found not local, so readiness recovers once the route exists. */
  recheck(): void;
  /** `capture-unavailable: ...` for /readyz, or undefined. */
  problem(): string | undefined;
}

export function createCaptureHealth(options: CaptureHealthOptions): CaptureHealth {
  const { logger, cidr, required } = options;
  let failure: Failure | undefined;
  let probing: Promise<void> | undefined;

  function describe(f: Failure): string {
    const where = f.port === 0 ? f.ip : formatAuthority(f.ip, f.port);
    return `capture-unavailable: ${f.code} ${where} (${SYSTEMIC[f.code]?.(cidr) ?? 'capture listeners cannot bind'})`;
  }

  const health: CaptureHealth = {
    failed(err, ip, port) {
      const code = err.code ?? '';
      if (SYSTEMIC[code] === undefined) return false;
      const first = failure === undefined;
      // A re-probe keeps the listener's reason: it names the port that actually failed.
      if (port === 0 && failure?.code === code) return true;
      failure = { code, ip, port };
      if (!first) return true;
      // Once, not per name: every allowed name would fail the same way.
      if (required) logger.error({ code, ip, port }, `transparent capture unavailable (--capture required): /readyz is 503 until it binds; ${describe(failure)}`);
      else logger.warn({ code, ip, port }, `transparent capture unavailable (--capture optional): /readyz stays ready and the proxy serves, but connections to policy DNS answers are not captured; ${describe(failure)}; --capture off stops trying`);
      return true;
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
