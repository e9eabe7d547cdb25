// Supervisor side of relays: an operator's upgraded (or CONNECTed) admin connection waits here until the
// boundary opens `POST /v1/relay/<id>`, then the two are bridged byte for byte. Pending and active relays are
// bounded, time out, and are freed with their instance. Never decides which targets are allowed.

import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from '../shared/node-http.js';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import { decodeMessage, type RelayOpenPush, type RelayTarget } from '../control/messages.js';
import { readBody } from '../control/ndjson.js';
import { describeError, RELAY_REFUSED_HEADER } from '../control/protocol.js';
import type { Logger } from '../telemetry/logger.js';
import { refuse, send } from './server.js';

const RELAY_OPEN_TIMEOUT_MS = 10_000;
const MAX_PENDING_RELAYS = 256;
const MAX_ACTIVE_RELAYS = 1_024;
const MAX_REFUSAL_BYTES = 8_192;

const RELAY_UPGRADE_TOKEN = 'boundary-relay';
/** How the caller asked: `POST ... Upgrade: boundary-relay` (101, JSON errors) or CONNECT (200, bare status lines). */
const RELAY_STYLES = ['upgrade', 'connect'] as const;
export type RelayStyle = (typeof RELAY_STYLES)[number];
/** Carries the error code on CONNECT answers, which have no body (socat and ssh read only the status line). */
const RELAY_ERROR_HEADER = 'boundary-error';

/**
 * The answer that ends a relay request that will not be bridged, in the caller's style. `headers` (fixed
 * names and values of our own, such as an authentication challenge) go out as given.
 */
export function relayErrorReply(style: RelayStyle, status: number, error: string, message: string, headers: Readonly<Record<string, string>> = {}): string {
  const line = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}`;
  if (style === 'connect') {
    return `${line}${RELAY_ERROR_HEADER}: ${error.replace(/[^A-Za-z0-9._-]/g, '')}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`;
  }
  const json = JSON.stringify({ error, message });
  return `${line}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\nconnection: close\r\n\r\n${json}`;
}

function bridgedReply(style: RelayStyle): string {
  return style === 'connect'
    ? 'HTTP/1.1 200 Connection Established\r\n\r\n'
    : `HTTP/1.1 101 Switching Protocols\r\nconnection: Upgrade\r\nupgrade: ${RELAY_UPGRADE_TOKEN}\r\n\r\n`;
}

interface RelayEntry {
  readonly id: string;
  readonly sandboxId: string;
  readonly instanceId: string;
  readonly sessionId: string;
  readonly target: RelayTarget;
  readonly style: RelayStyle;
  readonly client: Duplex;
  readonly head: Buffer;
  timer: NodeJS.Timeout | undefined;
  stream: ServerHttp2Stream | undefined;
}

export interface RelayBroker {
  /** Registers the caller's connection and returns the push to send, or why it cannot be opened. */
  open(request: {
    sandboxId: string;
    instanceId: string;
    sessionId: string;
    target: RelayTarget;
    style: RelayStyle;
    client: Duplex;
    head: Buffer;
  }):
    | { ok: true; push: RelayOpenPush }
    | { ok: false; status: number; message: string };
  /** The boundary's side arrived on POST /v1/relay/<id>. */
  accept(peerSandboxId: string, sessionId: string, relayId: string, stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void;
  /** Frees every relay of an instance (withdrawal). */
  closeInstance(sandboxId: string, instanceId: string): number;
  count(): { pending: number; active: number };
  close(): void;
}

export function createRelayBroker(options: { logger: Logger; openTimeoutMs?: number }): RelayBroker {
  const { logger } = options;
  const pending = new Map<string, RelayEntry>();
  const active = new Map<string, RelayEntry>();

  function httpReply(entry: RelayEntry, status: number, error: string, message: string): void {
    try {
      entry.client.end(relayErrorReply(entry.style, status, error, message));
    } catch {
      entry.client.destroy();
    }
  }

  function drop(entry: RelayEntry): void {
    if (entry.timer !== undefined) clearTimeout(entry.timer);
    pending.delete(entry.id);
    active.delete(entry.id);
    entry.client.destroy();
    if (entry.stream !== undefined && !entry.stream.destroyed) entry.stream.destroy();
  }

  function bridge(entry: RelayEntry, stream: ServerHttp2Stream): void {
    pending.delete(entry.id);
    if (entry.timer !== undefined) clearTimeout(entry.timer);
    entry.timer = undefined;
    entry.stream = stream;
    active.set(entry.id, entry);
    stream.respond({ ':status': 200 });
    entry.client.write(bridgedReply(entry.style));
    if (entry.head.length > 0) stream.write(entry.head);
    entry.client.on('error', () => drop(entry));
    stream.on('error', () => drop(entry));
    entry.client.on('close', () => drop(entry));
    stream.on('close', () => drop(entry));
    entry.client.pipe(stream);
    stream.pipe(entry.client);
    logger.info({ relayId: entry.id, sandboxId: entry.sandboxId, instanceId: entry.instanceId, target: entry.target, style: entry.style }, 'relay bridged');
  }

  return {
    open(request) {
      if (pending.size >= MAX_PENDING_RELAYS || active.size >= MAX_ACTIVE_RELAYS) {
        return { ok: false, status: 503, message: `relay limit reached (${MAX_PENDING_RELAYS} pending, ${MAX_ACTIVE_RELAYS} active)` };
      }
      const id = randomUUID();
      const entry: RelayEntry = { id, ...request, timer: undefined, stream: undefined };
      const timeoutMs = options.openTimeoutMs ?? RELAY_OPEN_TIMEOUT_MS;
      entry.timer = setTimeout(() => {
        pending.delete(id);
        httpReply(entry, 504, 'relay-timeout', `the boundary did not open relay ${id} within ${timeoutMs} ms`);
      }, timeoutMs);
      request.client.on('close', () => {
        if (pending.get(id) === entry) drop(entry);
      });
      request.client.on('error', () => drop(entry));
      pending.set(id, entry);
      return { ok: true, push: { kind: 'relay-open', id, target: request.target } };
    },
    accept(peerSandboxId, sessionId, relayId, stream, headers) {
      const entry = pending.get(relayId);
      if (entry === undefined || entry.sessionId !== sessionId || entry.sandboxId !== peerSandboxId) {
        refuse(stream, 404, 'unknown-session', `no pending relay ${relayId} for this session`, false);
        return;
      }
      const refusedCode = headers[RELAY_REFUSED_HEADER];
      if (refusedCode === undefined) {
        bridge(entry, stream);
        return;
      }
      pending.delete(relayId);
      if (entry.timer !== undefined) clearTimeout(entry.timer);
      readBody(stream, MAX_REFUSAL_BYTES)
        .then((body) => decodeMessage(body, ['refused']))
        .then(
          (refusal) => refusal,
          (err) => ({ kind: 'refused' as const, code: String(refusedCode), message: `refused (body unreadable: ${describeError(err)})`, retryable: false }),
        )
        .then((refusal) => {
          logger.warn({ relayId, sandboxId: entry.sandboxId, target: entry.target, code: refusal.code }, `relay refused by the boundary: ${refusal.message}`);
          httpReply(entry, 403, refusal.code, refusal.message);
          send(stream, 200, { kind: 'ack' });
        });
    },
    closeInstance(sandboxId, instanceId) {
      let closed = 0;
      for (const entry of [...pending.values(), ...active.values()]) {
        if (entry.sandboxId === sandboxId && entry.instanceId === instanceId) {
          drop(entry);
          closed += 1;
        }
      }
      return closed;
    },
    count: () => ({ pending: pending.size, active: active.size }),
    close() {
      for (const entry of [...pending.values(), ...active.values()]) drop(entry);
    },
  };
}
