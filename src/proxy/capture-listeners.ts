// The capture listeners: one net.Server on exactly each (synthetic IP, port) that a live mapping's endpoints
// allow, so any other port is refused by the kernel at once. Follows the pool (published / expired) and the
// policy store (a port no longer allowed closes). Owns sockets and bookkeeping; capture.ts decides.

import { createServer, type Server, type Socket } from 'node:net';
import { formatAuthority } from '../net/host.js';
import type { SyntheticPool } from '../net/synthetic.js';
import type { PolicyStore } from '../policy/store.js';
import type { AuditSink } from '../telemetry/event.js';
import type { Logger } from '../telemetry/logger.js';
import { createAdmission } from './admission.js';
import { allowedPorts } from '../chain/stages/capture-check.js';
import { createCaptureHealth } from './capture-health.js';
import type { ProxyMetrics } from './metrics.js';
import type { ProxyLimits } from './limits.js';

/**
 * An expired mapping keeps its listeners this long, admitting nothing: a client that cached the answer past
 * its TTL gets a `transparent_tcp_mapping_expired` event to explain the refusal instead of a bare reset.
 */
export const EXPIRED_LISTENER_LINGER_MS = 30_000;
/** Listeners across all mappings; the pool window bounds mappings, this bounds mappings × ports. */
const MAX_CAPTURE_LISTENERS = 8_192;

interface CaptureListenersOptions {
  readonly pool: SyntheticPool;
  readonly store: PolicyStore;
  readonly onConnection: (socket: Socket) => void;
  /** maxConnections (accepted and still open, across every capture listener), its per-source share, first byte. */
  readonly limits: ProxyLimits;
  /** The proxy's metrics (ProxyContext.metrics): refusals and first-byte timeouts are counted with the proxy's. */
  readonly metrics: ProxyMetrics;
  readonly now: () => number;
  readonly sink: AuditSink;
  readonly logger: Logger;
  /** `--synthetic-cidr`, for the route the unavailable-capture hint names. */
  readonly cidr: string;
  /** `--capture required` (readiness waits for capture) rather than optional. */
  readonly required: boolean;
}

export interface CaptureListeners {
  /** Follows the pool and the store from now on. */
  start(): void;
  /** Closes the listeners of mappings expired longer than EXPIRED_LISTENER_LINGER_MS (the DNS tick calls it). */
  sweep(): void;
  /** Settles once every listener being opened is bound (or failed); undefined when none is pending. */
  settled(): Promise<void> | undefined;
  listening(): readonly { readonly ip: string; readonly port: number }[];
  /** Captured connections open now, across every listener (bounded by maxConnections). */
  connections(): number;
  /** Binds a throwaway listener on `ip` (an address of the window) so readiness knows before any answer. */
  probe(ip: string): Promise<void>;
  /** Why capture cannot work at all (`capture-unavailable: ...`), cleared by a later successful bind. */
  problem(): string | undefined;
  /** Stops listening and destroys captured sockets that are still open. */
  close(): Promise<void>;
}

export function createCaptureListeners(options: CaptureListenersOptions): CaptureListeners {
  const { pool, store, now, logger } = options;
  const byIp = new Map<string, Map<number, Server>>();
  const expiredAt = new Map<string, number>();
  const pending = new Set<Promise<void>>();
  const binding = new WeakMap<Server, Promise<void>>();
  const admission = createAdmission({
    listener: 'transparent',
    maxConnections: options.limits.maxConnections,
    perSourcePercent: options.limits.maxConnectionsPerSourcePercent,
    firstByteTimeoutMs: options.limits.firstByteTimeoutMs,
    // Raw TCP may be server-first: a greeting relayed to the client ends the wait as well.
    eitherWay: true,
    metrics: options.metrics,
  });
  const unsubscribe: (() => void)[] = [];
  const health = createCaptureHealth({ logger, cidr: options.cidr, required: options.required });
  let count = 0;
  let closed = false;

  function accept(socket: Socket): void {
    // Refused with no reply, as capture refuses everything (docs/destinations.md#transparent-capture).
    if (closed || admission.admit(socket) !== 'admitted') {
      socket.destroy();
      return;
    }
    // While this connection is open its address goes to no other name (docs/dns.md#synthetic-pools), however
    // long the tunnel outlives the mapping.
    socket.once('close', pool.hold(socket.localAddress ?? ''));
    options.onConnection(socket);
  }

  function open(ip: string, port: number, ports: Map<number, Server>): void {
    if (count >= MAX_CAPTURE_LISTENERS) {
      logger.error({ ip, port, max: MAX_CAPTURE_LISTENERS }, 'capture listener limit reached; not listening');
      return;
    }
    const server = createServer({ allowHalfOpen: true, noDelay: true }, accept);
    ports.set(port, server);
    count++;
    const bound = new Promise<void>((resolve) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        // Not local (no `ip route add local <cidr> dev lo`) or taken: connections to it fail at once, as a
        // port without a listener does, and the operator is told why.
        if (ports.get(port) === server) {
          ports.delete(port);
          count--;
        }
        // A failure of the whole range was logged once by health; only this port's own problem is told here.
        if (!health.failed(err, ip, port)) {
          logger.warn({ code: err.code, ip, port }, `capture listener ${formatAuthority(ip, port)} failed: ${err.message}`);
          options.sink.emit({
            class: 'NET',
            activity: 'FAIL',
            severity: 'LOW',
            dst: { ip, port },
            statusDetail: 'transparent_tcp_listen_failed',
            message: `capture listener ${formatAuthority(ip, port)} failed: ${err.code ?? err.message}`,
          });
        }
        resolve();
      };
      server.once('error', onError);
      server.listen({ host: ip, port, exclusive: true }, () => {
        server.removeListener('error', onError);
        health.bound(ip, port);
        server.on('error', (err) => logger.warn({ err, ip, port }, 'capture listener error'));
        resolve();
      });
    });
    pending.add(bound);
    binding.set(server, bound);
    void bound.then(() => pending.delete(bound));
  }

  function shut(ports: Map<number, Server>, port: number): void {
    const server = ports.get(port);
    if (server === undefined) return;
    ports.delete(port);
    count--;
    // Stops accepting; connections already admitted are tunnels and follow the tunnel registry. A bind
    // still in flight would complete after an early close(), so close once it has settled.
    void (binding.get(server) ?? Promise.resolve()).then(() => server.close());
  }

  /** Makes the listeners of `ip` exactly the ports the current policy allows for its mapping. */
  function reconcile(ip: string): void {
    const found = pool.lookup(ip);
    const lingering = found.state === 'expired' && now() - (expiredAt.get(ip) ?? now()) < EXPIRED_LISTENER_LINGER_MS;
    const wanted = closed || found.state === 'missing' || (found.state === 'expired' && !lingering) ? [] : allowedPorts(store.current(), found.mapping);
    let ports = byIp.get(ip);
    if (ports === undefined) {
      if (wanted.length === 0) return;
      ports = new Map();
      byIp.set(ip, ports);
    }
    for (const port of [...ports.keys()]) if (!wanted.includes(port)) shut(ports, port);
    for (const port of wanted) if (!ports.has(port)) open(ip, port, ports);
    if (ports.size === 0) byIp.delete(ip);
  }

  return {
    start() {
      admission.start();
      unsubscribe.push(
        pool.subscribe((event) => {
          const ip = event.mapping.syntheticIp;
          if (event.kind === 'expired') expiredAt.set(ip, now());
          else expiredAt.delete(ip);
          reconcile(ip);
        }),
        store.subscribe(() => {
          for (const ip of [...byIp.keys()]) reconcile(ip);
        }),
      );
    },
    sweep() {
      health.recheck();
      for (const [ip, at] of [...expiredAt]) {
        if (now() - at < EXPIRED_LISTENER_LINGER_MS) continue;
        expiredAt.delete(ip);
        reconcile(ip);
      }
    },
    settled() {
      return pending.size === 0 ? undefined : Promise.all(pending).then(() => undefined);
    },
    probe: health.probe,
    problem: health.problem,
    connections: admission.open,
    listening() {
      const out: { ip: string; port: number }[] = [];
      for (const [ip, ports] of byIp) for (const port of ports.keys()) out.push({ ip, port });
      return out;
    },
    async close() {
      closed = true;
      for (const off of unsubscribe.splice(0)) off();
      await Promise.all(pending);
      const servers: Server[] = [];
      for (const ports of byIp.values()) servers.push(...ports.values());
      byIp.clear();
      count = 0;
      admission.stop();
      for (const socket of admission.sockets()) socket.destroy();
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    },
  };
}
