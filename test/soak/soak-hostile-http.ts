// The soak's hostile HTTP classes, each a bounded wave repeated through the hostile phase: slowloris heads (408
// at the headers timeout), huge heads (431), endless chunked bodies to a body-rewrite endpoint (413
// credential_body_too_large at its buffer limit), CONNECT to a denied host (403 policy_denied) and zero-byte
// sockets (closed by the first-byte timeout, or held to the end where there is none); plus idle allowed CONNECT
// tunnels, opened once and held. Loopback only.

import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as pause } from 'node:timers/promises';
import { MAX_BODY_REWRITE_BYTES } from '../../src/credentials/rewrite-body.js';
import { FIRST_BYTE_TIMEOUT_MS } from '../../src/proxy/admission.js';
import { HEADERS_TIMEOUT_MS, MAX_HEAD_BYTES, REQUEST_TIMEOUT_MS } from '../../src/proxy/limits.js';
import { TUNNEL_IDLE_TIMEOUT_MS } from '../../src/proxy/tunnel.js';
import { echoRoundTrip } from '../harness/liveness.js';
import { openTunnel, rawExchange, readAll, statusOf } from '../harness/proxy-client.js';
import { withinDeadline } from '../harness/waiters.js';
import { attemptInto, type HostileTally, hostileTally, type Phase, recordOutcome, repeatWaves } from './soak-hostile.js';
import { SOAK_HOSTS, type SoakStack } from './soak-stack.js';

/** Zero-byte sockets per wave, one wave every first-byte timeout. */
export const IDLE_SOCKETS = 64;
/** Idle allowed CONNECT tunnels held from the start of the hostile phase. */
export const IDLE_TUNNELS = 32;
/** Slowloris sockets per wave, each dripping one header line a second. */
export const SLOWLORIS_PER_WAVE = 16;
const SLOWLORIS_DRIP_MS = 1_000;
/**
 * A slowloris head must be answered 408 by the headers timeout, not by the whole-request timeout, which answers 408
 * too: the drips stop halfway between the two, so neither a late sweep on a loaded host nor the wrong timer passes.
 */
const SLOWLORIS_MAX_DRIPS = Math.ceil((HEADERS_TIMEOUT_MS + REQUEST_TIMEOUT_MS) / 2 / SLOWLORIS_DRIP_MS);
/** Huge heads, endless bodies and denied CONNECTs: per wave, and the wave interval. */
const HUGE_HEADS_PER_WAVE = 4;
const HUGE_HEADS_INTERVAL_MS = 250;
const CHUNKED_PER_WAVE = 2;
const CHUNKED_INTERVAL_MS = 1_000;
/** An endless body is cut at the rewrite buffer; one that is not answered by 32 times that is a finding. */
const CHUNKED_MAX_BYTES = 32 * MAX_BODY_REWRITE_BYTES;
const CHUNK_BYTES = 16_384;
const DENIED_CONNECTS_PER_WAVE = 2;
const DENIED_CONNECTS_INTERVAL_MS = 250;
/** Bounds a hang only: a refused exchange not answered and closed within this counts as not refused. */
const ANSWER_DEADLINE_MS = 30_000;
/**
 * Bounds a hang only: an idle tunnel past its timeout is closed by the next sweep, a zero-byte socket by the
 * first-byte sweep, both late on a loaded host. Which timer closed a zero-byte socket is told by what it received.
 */
const IDLE_CLOSE_HANG_BOUND_MS = 60_000;

/** Everything one socket received, and its close. */
function follow(socket: Socket): { text(): string; closed: Promise<unknown>; isClosed(): boolean } {
  let received = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  socket.on('error', () => socket.destroy());
  // Not once(socket, 'close'): it rejects on the EPIPE or reset that comes first when the boundary cuts a client off.
  const closing = new Promise<void>((resolve) =>
    socket.once('close', () => {
      closed = true;
      resolve();
    }),
  );
  return { text: () => received, closed: closing, isClosed: () => closed };
}

async function openRaw(port: number, held: Set<Socket>): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port });
  held.add(socket);
  socket.once('close', () => held.delete(socket));
  socket.on('error', () => socket.destroy());
  await once(socket, 'connect');
  return socket;
}

async function slowloris(stack: SoakStack, held: Set<Socket>): Promise<{ ok: boolean; sample: string }> {
  const authority = `${SOAK_HOSTS.plain}:${stack.ports.plain}`;
  const socket = await openRaw(stack.proxyPort, held);
  const seen = follow(socket);
  socket.write(`GET http://${authority}/slow HTTP/1.1\r\nHost: ${authority}\r\n`);
  // Bounded by SLOWLORIS_MAX_DRIPS; the drip is the attack's own pace, and it stops once the boundary answers.
  for (let i = 0; i < SLOWLORIS_MAX_DRIPS && !seen.isClosed() && seen.text() === ''; i++) {
    await pause(SLOWLORIS_DRIP_MS);
    if (!seen.isClosed()) socket.write(`x-drip-${i}: a\r\n`);
  }
  await withinDeadline(seen.closed, 'slowloris socket closed', ANSWER_DEADLINE_MS).catch(() => socket.destroy());
  const status = statusOf(seen.text());
  return { ok: status === 408, sample: `status ${status} after ${SLOWLORIS_MAX_DRIPS} drips: ${seen.text().slice(0, 80)}` };
}

async function hugeHead(stack: SoakStack): Promise<{ ok: boolean; sample: string }> {
  const authority = `${SOAK_HOSTS.plain}:${stack.ports.plain}`;
  const raw = await rawExchange(stack.proxyPort, `GET http://${authority}/huge HTTP/1.1\r\nHost: ${authority}\r\nX-Huge: ${'a'.repeat(MAX_HEAD_BYTES + 1_024)}\r\n\r\n`);
  return { ok: statusOf(raw) === 431, sample: `status ${statusOf(raw)}: ${raw.slice(0, 80)}` };
}

async function endlessChunked(stack: SoakStack, held: Set<Socket>): Promise<{ ok: boolean; sample: string }> {
  const authority = `${SOAK_HOSTS.rewrite}:${stack.ports.plain}`;
  const socket = await openRaw(stack.proxyPort, held);
  const seen = follow(socket);
  socket.write(`POST http://${authority}/upload HTTP/1.1\r\nHost: ${authority}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
  const chunk = Buffer.from(`${CHUNK_BYTES.toString(16)}\r\n${'a'.repeat(CHUNK_BYTES)}\r\n`);
  let sent = 0;
  let stalled = false;
  const deadline = performance.now() + ANSWER_DEADLINE_MS;
  // Bounded by CHUNKED_MAX_BYTES and the deadline; stops at the first byte of an answer.
  while (sent < CHUNKED_MAX_BYTES && seen.text() === '' && !seen.isClosed() && performance.now() < deadline) {
    sent += CHUNK_BYTES;
    if (socket.write(chunk)) continue;
    // Not once(socket, 'drain'): it rejects on the EPIPE of a boundary that answered and closed, as it should.
    const drained = new Promise((resolve) => socket.once('drain', () => resolve('drained')));
    stalled = (await Promise.race([drained, seen.closed, pause(Math.max(0, deadline - performance.now()))])) === undefined && !seen.isClosed();
  }
  if (stalled && seen.text() === '') {
    socket.destroy();
    return { ok: false, sample: `stalled: no answer, no close and nothing read for ${ANSWER_DEADLINE_MS} ms after ${sent} body bytes` };
  }
  await withinDeadline(seen.closed, 'endless-body socket closed', ANSWER_DEADLINE_MS).catch(() => socket.destroy());
  const text = seen.text();
  // The 413 is written while the client is still sending: the boundary half-closes and lingers, reading and
  // dropping the rest (deny.ts lingerAfterAnswer), so no reset can destroy the answer before it is read.
  if (statusOf(text) === 413 && text.includes('credential_body_too_large')) return { ok: true, sample: '' };
  return { ok: false, sample: `status ${statusOf(text)} after ${sent} body bytes: ${text.slice(0, 120)}` };
}

async function deniedConnect(stack: SoakStack): Promise<{ ok: boolean; sample: string }> {
  const tunnel = await openTunnel(stack.proxyPort, `${SOAK_HOSTS.denied}:443`);
  const text = await withinDeadline(readAll(tunnel.socket, tunnel.rest), 'denied CONNECT closed', ANSWER_DEADLINE_MS).finally(() => tunnel.socket.destroy());
  return { ok: tunnel.status === 403 && text.includes('policy_denied'), sample: `status ${tunnel.status}: ${text.slice(0, 120)}` };
}

async function parallel(count: number, tally: HostileTally, attempt: () => Promise<{ ok: boolean; sample: string }>): Promise<void> {
  await Promise.all(Array.from({ length: count }, () => attemptInto(tally, attempt)));
}

export interface HttpHostiles {
  readonly tallies: HostileTally[];
  /** Resolves when every wave loop has seen the phase end and finished its wave. */
  readonly done: Promise<void>;
  /** Checks what is held (zero-byte sockets without a first-byte timeout, idle tunnels) into the tallies. */
  settle(): Promise<void>;
  /** Destroys every socket this module opened. */
  destroy(): void;
}

/**
 * One zero-byte socket, until it is closed (or IDLE_CLOSE_HANG_BOUND_MS passes). The first-byte timeout closes it
 * with nothing written; the headers timeout, the next to come, would answer 408 first.
 */
async function idleUntilClosed(stack: SoakStack, held: Set<Socket>): Promise<{ ok: boolean; sample: string }> {
  const openedAt = performance.now();
  const socket = await openRaw(stack.proxyPort, held);
  const seen = follow(socket);
  const closed = await withinDeadline(seen.closed, 'zero-byte socket closed', IDLE_CLOSE_HANG_BOUND_MS).then(
    () => true,
    () => false,
  );
  socket.destroy();
  const after = (performance.now() - openedAt).toFixed(0);
  if (!closed) return { ok: false, sample: `still open after ${after} ms` };
  return { ok: seen.text() === '', sample: `closed after ${after} ms with an answer, not by the first-byte timeout: ${JSON.stringify(seen.text().slice(0, 60))}` };
}

interface HeldTunnel {
  readonly socket: Socket;
  readonly openedAt: number;
  closedAt: number | undefined;
}

function holdTunnel(socket: Socket): HeldTunnel {
  const held: HeldTunnel = { socket, openedAt: performance.now(), closedAt: undefined };
  socket.once('close', () => {
    held.closedAt = performance.now();
  });
  return held;
}

/**
 * An idle tunnel younger than the idle timeout must still relay; one that lived past it must be closed by it, not
 * before (the long form outlives TUNNEL_IDLE_TIMEOUT_MS; the short form does not). One past it and still open is
 * waited for, not failed at once: on a loaded host the timer comes late, and only a tunnel never closed is a finding.
 */
async function checkTunnel(tunnel: HeldTunnel, i: number, tally: HostileTally): Promise<void> {
  if (tunnel.closedAt === undefined && performance.now() - tunnel.openedAt > TUNNEL_IDLE_TIMEOUT_MS) {
    await withinDeadline(new Promise((resolve) => tunnel.socket.once('close', resolve)), 'idle tunnel closed', IDLE_CLOSE_HANG_BOUND_MS).catch(() => undefined);
    if (tunnel.closedAt === undefined) {
      recordOutcome(tally, false, `still open ${IDLE_CLOSE_HANG_BOUND_MS} ms past its idle timeout`);
      return;
    }
  }
  if (tunnel.closedAt !== undefined) {
    const lived = tunnel.closedAt - tunnel.openedAt;
    recordOutcome(tally, lived >= TUNNEL_IDLE_TIMEOUT_MS, `closed after ${lived.toFixed(0)} ms, before the idle timeout`);
    return;
  }
  const text = `still-relaying-${i}`;
  const echoed = await withinDeadline(echoRoundTrip(tunnel.socket, text), 'idle tunnel echo', ANSWER_DEADLINE_MS).catch((err: Error) => err.message);
  recordOutcome(tally, echoed === text, `echo: ${echoed}`);
}

export async function startHttpHostiles(stack: SoakStack, phase: Phase): Promise<HttpHostiles> {
  const all = new Set<Socket>();
  const idleTally = hostileTally('idle-socket', 'closed by the first-byte timeout');
  const tunnelTally = hostileTally('idle-tunnel', `200, relays until closed at the ${TUNNEL_IDLE_TIMEOUT_MS / 1_000} s idle timeout`);
  const tallies = {
    slowloris: hostileTally('slowloris', '408'),
    huge: hostileTally('huge-head', '431'),
    chunked: hostileTally('endless-chunked', '413 credential_body_too_large'),
    denied: hostileTally('connect-denied', '403 policy_denied'),
  };
  const tunnels: HeldTunnel[] = [];
  for (let i = 0; i < IDLE_TUNNELS; i++) {
    const tunnel = await openTunnel(stack.proxyPort, `${SOAK_HOSTS.tunnel}:${stack.ports.echo}`);
    all.add(tunnel.socket);
    if (tunnel.status === 200) tunnels.push(holdTunnel(tunnel.socket));
    else recordOutcome(tunnelTally, false, `CONNECT answered ${tunnel.status}`);
  }
  const done = Promise.all([
    repeatWaves(phase, FIRST_BYTE_TIMEOUT_MS, () => parallel(IDLE_SOCKETS, idleTally, () => idleUntilClosed(stack, all))),
    repeatWaves(phase, SLOWLORIS_DRIP_MS, () => parallel(SLOWLORIS_PER_WAVE, tallies.slowloris, () => slowloris(stack, all))),
    repeatWaves(phase, HUGE_HEADS_INTERVAL_MS, () => parallel(HUGE_HEADS_PER_WAVE, tallies.huge, () => hugeHead(stack))),
    repeatWaves(phase, CHUNKED_INTERVAL_MS, () => parallel(CHUNKED_PER_WAVE, tallies.chunked, () => endlessChunked(stack, all))),
    repeatWaves(phase, DENIED_CONNECTS_INTERVAL_MS, () => parallel(DENIED_CONNECTS_PER_WAVE, tallies.denied, () => deniedConnect(stack))),
  ]).then(() => undefined);
  return {
    tallies: [idleTally, tunnelTally, ...Object.values(tallies)],
    done,
    async settle() {
      // Parallel: each echo waits up to ANSWER_DEADLINE_MS, and a long form holds tens of tunnels.
      await Promise.all(tunnels.map((tunnel, i) => checkTunnel(tunnel, i, tunnelTally)));
    },
    destroy() {
      for (const socket of all) socket.destroy();
    },
  };
}
