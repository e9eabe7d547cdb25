// The proxy's limits and their defaults (docs/destinations.md#limits): what config.ts overrides and every listener
// and adapter is built with.

import { CONNECT_TIMEOUT_MS } from '../chain/dial.js';
import { H2_STREAM_STALL_TIMEOUT_MS } from '../http2/stall-watch.js';
import { FIRST_BYTE_TIMEOUT_MS, MAX_CONNECTIONS_PER_SOURCE_PERCENT } from './admission.js';
import { TUNNEL_IDLE_TIMEOUT_MS } from './tunnel.js';

/** docs/destinations.md#limits: an inspected request head (and any forward request head) beyond this is a 431. */
export const MAX_HEAD_BYTES = 16_384;
export const MAX_CONNECTIONS_PER_LISTENER = 4_096;
/** Slowloris: a request head must be complete this long after its first byte. */
export const HEADERS_TIMEOUT_MS = 10_000;
/** A whole request, body included (slow POST, RX-04). */
export const REQUEST_TIMEOUT_MS = 120_000;
const KEEP_ALIVE_TIMEOUT_MS = 15_000;
/** How often Node sweeps connections for the two timeouts above. */
export const CONNECTIONS_CHECK_INTERVAL_MS = 1_000;
/** On close, in-flight connections get this long to finish before they are destroyed. */
export const CLOSE_GRACE_MS = 5_000;

export interface ProxyLimits {
  readonly maxConnections: number;
  /** A source address may hold this percentage of maxConnections (admission.ts); 100 lets one source take all. */
  readonly maxConnectionsPerSourcePercent: number;
  /** A connection silent this long after accept is closed (admission.ts). */
  readonly firstByteTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly tunnelIdleTimeoutMs: number;
  /** An HTTP/2 answer that moves nothing this long while it waits on the client is reset (http2/stall-watch.ts). */
  readonly h2StallTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly closeGraceMs: number;
}

export const DEFAULT_PROXY_LIMITS: ProxyLimits = Object.freeze({
  maxConnections: MAX_CONNECTIONS_PER_LISTENER,
  maxConnectionsPerSourcePercent: MAX_CONNECTIONS_PER_SOURCE_PERCENT,
  firstByteTimeoutMs: FIRST_BYTE_TIMEOUT_MS,
  headersTimeoutMs: HEADERS_TIMEOUT_MS,
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
  keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
  tunnelIdleTimeoutMs: TUNNEL_IDLE_TIMEOUT_MS,
  h2StallTimeoutMs: H2_STREAM_STALL_TIMEOUT_MS,
  connectTimeoutMs: CONNECT_TIMEOUT_MS,
  closeGraceMs: CLOSE_GRACE_MS,
});
