// Open tunnels pinned to the decision that opened them, the raw byte relay, and re-evaluation on reload:
// a tunnel whose decision changed under a new policy generation is closed; the others keep running.

import type { Socket } from 'node:net';
import type { SelfAddresses } from '../net/ssrf.js';
import { validateDestination } from '../net/ssrf.js';
import { decide } from '../policy/decide.js';
import type { IdentityClaim } from '../policy/binary-identity.js';
import type { Decision, Policy } from '../policy/types.js';
import { decisionNeedsInspection } from '../chain/inspection.js';
import { sendReadsTo } from '../chain/bulk-reads.js';

/** Reference RX-05: a tunnel with no bytes either way for this long is closed. */
export const TUNNEL_IDLE_TIMEOUT_MS = 300_000;
/** After one side has closed, the other gets this long to finish before it is destroyed. */
export const TUNNEL_LINGER_MS = 10_000;
/**
 * How often per idle timeout a relay looks at its byte counters: an idle tunnel closes between one idle timeout
 * and an eighth more after its last byte, and no timer is touched per chunk (a socket timeout is re-armed on
 * every read and write).
 */
export const IDLE_CHECKS_PER_TIMEOUT = 8;

export interface PinnedTunnel {
  readonly host: string;
  readonly port: number;
  readonly addresses: readonly string[];
  readonly endpointId: string | undefined;
  readonly inspect: boolean;
  /** The process that opened it: a reload decides again with the same identity (docs/identity.md#reloads). */
  readonly identity?: IdentityClaim | undefined;
  /**
   * An L7 relay (a WebSocket after its 101) re-decides its own request here: true when the new policy
   * decides it as before. It then replaces the L4 endpoint/inspection comparison; the rest still applies.
   */
  readonly recheck?: (policy: Policy) => boolean;
  close(reason: string): void;
}

export interface TunnelRegistry {
  /** Registers a tunnel; the returned function removes it (call it when the tunnel closes). */
  add(tunnel: PinnedTunnel): () => void;
  size(): number;
  /** Closes every tunnel whose decision changed under `policy`; returns how many were closed. */
  reevaluate(policy: Policy, options: { allowLoopback: boolean; selfAddresses: SelfAddresses }): number;
  /**
   * Whether a tunnel pinned like `pinned` would stay open across a reload to `policy`: a connection that was
   * still opening when the reload landed is held to the same test, not refused for the generation change alone.
   */
  survives(policy: Policy, pinned: Omit<PinnedTunnel, 'close'>, options: { allowLoopback: boolean; selfAddresses: SelfAddresses }): boolean;
  closeAll(reason: string): void;
}

interface TunnelRegistryOptions {
  /** The credential and middleware guards of a route (chain/middleware-route.ts): a forced inspection is part of the decision. */
  readonly routeOf?: (decision: Decision, host: string, port: number, policy: Policy) => 'as-is' | 'inspect' | 'refuse';
}

export function createTunnelRegistry(registryOptions: TunnelRegistryOptions = {}): TunnelRegistry {
  const open = new Set<PinnedTunnel>();
  return {
    add(tunnel) {
      open.add(tunnel);
      return () => {
        open.delete(tunnel);
      };
    },
    size: () => open.size,
    reevaluate(policy, options) {
      let closed = 0;
      // L7 relays first: a WebSocket gets its close frame out before an enclosing CONNECT tunnel is cut.
      const ordered = [...open].sort((a, b) => Number(b.recheck !== undefined) - Number(a.recheck !== undefined));
      for (const t of ordered) {
        if (stillAllowed(policy, t, { ...options, routeOf: registryOptions.routeOf })) continue;
        open.delete(t);
        t.close('policy-changed');
        closed++;
      }
      return closed;
    },
    survives: (policy, pinned, options) => stillAllowed(policy, pinned, { ...options, routeOf: registryOptions.routeOf }),
    closeAll(reason) {
      for (const t of [...open]) t.close(reason);
      open.clear();
    },
  };
}

function stillAllowed(
  policy: Policy,
  t: Omit<PinnedTunnel, 'close'>,
  options: { allowLoopback: boolean; selfAddresses: SelfAddresses; routeOf: TunnelRegistryOptions['routeOf'] },
): boolean {
  const decision = decide(policy, { adapter: 'connect', host: t.host, port: t.port, identity: t.identity });
  if (decision.verdict === 'deny') return false;
  const route = options.routeOf?.(decision, t.host, t.port, policy) ?? 'as-is';
  if (route === 'refuse') return false;
  if (t.recheck !== undefined) {
    if (!t.recheck(policy)) return false;
  } else {
    if (decision.endpoint?.id !== t.endpointId) return false;
    if ((decisionNeedsInspection(decision) || route === 'inspect') !== t.inspect) return false;
  }
  // The pinned addresses must pass the new endpoint's validation plan too (allowed_ips may have shrunk).
  const check = validateDestination({
    endpoint: decision.endpoint,
    host: t.host,
    port: t.port,
    addresses: t.addresses,
    allowLoopback: options.allowLoopback,
    selfAddresses: options.selfAddresses,
  });
  return check.ok && check.addresses.length === t.addresses.length;
}

/** Why a tunnel ended abnormally (RX-05, RX-10); a clean close on both sides has no cause. */
const TUNNEL_END_CAUSES = ['idle-timeout', 'client-reset', 'upstream-reset', 'client-error', 'upstream-error'] as const;
export type TunnelEndCause = (typeof TUNNEL_END_CAUSES)[number];

function errorCause(side: 'client' | 'upstream', err: NodeJS.ErrnoException): TunnelEndCause {
  return err.code === 'ECONNRESET' || err.code === 'EPIPE' ? `${side}-reset` : `${side}-error`;
}

/**
 * Relays bytes both ways with half-close: a FIN from one side ends the other side's writes only, so a
 * response still in flight is delivered (RX-09). An error or idle timeout destroys both sockets; `onClosed`
 * then gets the first such cause. `a` is the client side, `b` the upstream.
 */
export function relayRaw(a: Socket, b: Socket, idleTimeoutMs: number, onClosed: (cause?: TunnelEndCause) => void): void {
  let closed = 0;
  let cause: TunnelEndCause | undefined;
  // The watch below owns idleness from here: a socket timeout a caller armed before (the SNI gate, sniffing)
  // would be re-armed on every chunk.
  a.setTimeout(0);
  b.setTimeout(0);
  const stopIdleWatch = watchIdle(a, b, idleTimeoutMs, () => destroyBoth('idle-timeout'));
  const destroyBoth = (why?: TunnelEndCause): void => {
    cause ??= why;
    a.destroy();
    b.destroy();
  };
  for (const [self, other, side] of [
    [a, b, 'client'],
    [b, a, 'upstream'],
  ] as const) {
    self.on('error', (err: NodeJS.ErrnoException) => destroyBoth(errorCause(side, err)));
    self.once('close', (hadError: boolean) => {
      if (hadError) destroyBoth();
      else if (!other.destroyed) {
        // Nobody is left to read what the other side sends: flush what is queued, then let it go soon.
        other.end();
        other.setTimeout(Math.min(idleTimeoutMs, TUNNEL_LINGER_MS), () => destroyBoth());
      }
      closed++;
      if (closed === 2) {
        stopIdleWatch();
        onClosed(cause);
      }
    });
  }
  a.pipe(b);
  const direct = relayReadsInto(b, a);
  if (!direct) b.pipe(a);
  a.resume();
  // A direct relay reads on only once `a` took what was handed over (relayReadsInto).
  if (!direct || !a.writableNeedDrain) b.resume();
}

/**
 * `b`'s reads written to `a` straight from the buffer they were read into (chain/bulk-reads.ts), with pipe()'s
 * backpressure and end; false when `b` does not read that way.
 */
function relayReadsInto(b: Socket, a: Socket): boolean {
  const resume = (): void => {
    b.resume();
  };
  const taken = sendReadsTo(b, (chunk, owned) => {
    if (!owned) {
      if (a.write(chunk)) return true;
      a.once('drain', resume);
      return false;
    }
    // The chunk must be out of `a`'s queue before `b` reads into its buffer again.
    a.write(chunk, resume);
    return a.writableLength === 0;
  });
  if (!taken) return false;
  // Bytes handed over by sendReadsTo may have filled `a`: relayRaw then waits for this drain before reading.
  if (a.writableNeedDrain) a.once('drain', resume);
  if (b.readableEnded) a.end();
  else b.once('end', () => a.end());
  return true;
}

/**
 * Calls `onIdle` once no byte has moved on either socket for `idleTimeoutMs` (never sooner; at most
 * idleTimeoutMs / IDLE_CHECKS_PER_TIMEOUT later). Returns the function that stops the watch.
 */
function watchIdle(a: Socket, b: Socket, idleTimeoutMs: number, onIdle: () => void): () => void {
  let seen = -1;
  let quietChecks = 0;
  const timer = setInterval(() => {
    const moved = a.bytesRead + a.bytesWritten + b.bytesRead + b.bytesWritten;
    if (moved !== seen) {
      seen = moved;
      quietChecks = 0;
    } else if (++quietChecks >= IDLE_CHECKS_PER_TIMEOUT) {
      clearInterval(timer);
      onIdle();
    }
  }, idleTimeoutMs / IDLE_CHECKS_PER_TIMEOUT);
  // An idle tunnel's watch never keeps the process alive; its sockets do.
  timer.unref();
  return () => clearInterval(timer);
}
