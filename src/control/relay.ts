// Boundary side of a relay: on `relay-open` it dials the target (a loopback port listed in
// --relay-allow, nothing else) and bridges it to a `POST /v1/relay/<id>` stream; a refusal is
// reported on the same path. Never decides policy: relays go into the workload, not out of it.

import type { ClientHttp2Session } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import type { AuditSink } from '../telemetry/event.js';
import { encodeMessage, type RefusalCode, type RelayOpenPush, type RelayTarget } from './messages.js';
import { describeError, isLoopbackHost, RELAY_REFUSED_HEADER, SESSION_HEADER } from './protocol.js';

const RELAY_CONNECT_TIMEOUT_MS = 5_000;
const MAX_RELAYS = 64;

/**
 * Parses `--relay-allow`: comma-separated `PORT` (127.0.0.1) or `HOST:PORT` / `[::1]:PORT` with a
 * loopback host. Throws CONFIG_INVALID naming every bad entry.
 */
export function parseRelayAllow(text: string): RelayTarget[] {
  const out: RelayTarget[] = [];
  const bad: string[] = [];
  for (const raw of text.split(',').map((part) => part.trim()).filter((part) => part !== '')) {
    const match = /^(?:(\[::1\]|[0-9.]+):)?(\d{1,5})$/.exec(raw);
    const host = match?.[1] === undefined ? '127.0.0.1' : match[1].replace(/^\[|\]$/g, '');
    const port = Number(match?.[2]);
    if (match === null || !isLoopbackHost(host) || port < 1 || port > 65_535) bad.push(raw);
    else out.push({ host, port });
  }
  if (bad.length > 0) {
    throw new BoundaryError('CONFIG_INVALID', `--relay-allow: not a loopback PORT or HOST:PORT: ${bad.join(', ')}`, {
      issues: bad.map((entry) => ({ code: 'CONFIG_INVALID', path: 'relayAllow', message: `${entry}: not a loopback port` })),
    });
  }
  return out;
}

interface RelayContext {
  readonly session: ClientHttp2Session;
  readonly sessionId: string;
  readonly relayAllow: readonly RelayTarget[];
  readonly sink: AuditSink;
  readonly active: Set<Socket>;
}

/** Handles one relay-open push. Never throws: every outcome is an event and a stream. */
export function openRelay(push: RelayOpenPush, context: RelayContext): void {
  const { target } = push;
  const allowed = isLoopbackHost(target.host) && context.relayAllow.some((a) => a.host === target.host && a.port === target.port);
  if (!allowed) {
    refuse(push, context, 'relay-target-not-allowed', `relay target ${target.host}:${target.port} is not a loopback port listed in --relay-allow`);
    return;
  }
  if (context.active.size >= MAX_RELAYS) {
    refuse(push, context, 'relay-target-unreachable', `already ${MAX_RELAYS} relays open (MAX_RELAYS)`);
    return;
  }
  const socket = netConnect({ host: target.host, port: target.port });
  context.active.add(socket);
  const timer = setTimeout(() => socket.destroy(new Error(`no connection within ${RELAY_CONNECT_TIMEOUT_MS} ms`)), RELAY_CONNECT_TIMEOUT_MS);
  socket.once('close', () => {
    clearTimeout(timer);
    context.active.delete(socket);
  });
  let connected = false;
  socket.once('error', (err) => {
    if (connected) return;
    refuse(push, context, 'relay-target-unreachable', `relay target ${target.host}:${target.port}: ${describeError(err)}`);
  });
  socket.once('connect', () => {
    connected = true;
    clearTimeout(timer);
    bridge(push, context, socket);
  });
}

function bridge(push: RelayOpenPush, context: RelayContext, socket: Socket): void {
  let stream: ReturnType<ClientHttp2Session['request']>;
  try {
    stream = context.session.request({ ':method': 'POST', ':path': `/v1/relay/${push.id}`, [SESSION_HEADER]: context.sessionId });
  } catch (err) {
    socket.destroy();
    context.sink.emit(relayEvent('FAIL', 'LOW', push, `relay ${push.id} could not open a stream: ${describeError(err)}`));
    return;
  }
  stream.on('error', () => socket.destroy());
  socket.on('error', () => stream.close());
  stream.on('close', () => socket.destroy());
  socket.on('close', () => {
    if (!stream.closed) stream.close();
  });
  stream.pipe(socket);
  socket.pipe(stream);
  context.sink.emit(relayEvent('OPEN', 'INFO', push, `relay ${push.id} to ${push.target.host}:${push.target.port} open`));
}

function refuse(push: RelayOpenPush, context: RelayContext, code: RefusalCode, message: string): void {
  context.sink.emit({ ...relayEvent('REFUSE', 'MED', push, message), action: 'DENIED', detail: code });
  try {
    const stream = context.session.request({
      ':method': 'POST',
      ':path': `/v1/relay/${push.id}`,
      [SESSION_HEADER]: context.sessionId,
      [RELAY_REFUSED_HEADER]: code,
    });
    stream.on('error', () => undefined);
    stream.resume();
    stream.end(encodeMessage({ kind: 'refused', code, message, retryable: false }));
  } catch {
    // The session is already gone; the supervisor times the relay out on its side.
  }
}

function relayEvent(activity: 'OPEN' | 'FAIL' | 'REFUSE', severity: 'INFO' | 'LOW' | 'MED', push: RelayOpenPush, message: string) {
  return {
    class: 'NET' as const,
    activity,
    severity,
    engine: 'control' as const,
    dst: { ip: push.target.host, port: push.target.port },
    message,
    unmapped: { relayId: push.id },
  };
}
