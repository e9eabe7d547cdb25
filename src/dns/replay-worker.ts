// A policy DNS replay worker (docs/dns.md#replay-workers): its own UDP socket on the DNS port (SO_REUSEPORT), which
// answers only questions the main thread already answered and handed over, while the shared epoch they were made
// under is current and their TTL lasts, and a refusal only while the shared refused-name bucket admits it (REFUSED
// from the query over it, as the main thread answers); every other datagram goes to the main thread untouched, and so
// does every datagram from the source port of one of boundary's own upstream queries. Decides nothing.

import { createSocket } from 'node:dgram';
import { parentPort, workerData } from 'node:worker_threads';
import { createSharedTokenBucket } from '../net/token-bucket.js';
import { createQueryParser, respondFrom, responseLimit, type WireAnswer } from './answer.js';
import { isOwnPort } from './own-queries.js';
import { refusedFromQuery } from './rate-limit.js';
import { ANSWER_SLOTS, answerSlot } from './replicas.js';
import { UDP_RECEIVE_BUFFER_BYTES } from './server.js';
import { createUdpReplies } from './udp-replies.js';
import type { ToWorker, WorkerSetup } from './worker-protocol.js';
import { DNS_WORKER_REPORT_INTERVAL_MS, sharedClock } from './worker-protocol.js';

interface Replayable {
  readonly template: WireAnswer;
  /** On sharedClock()'s timeline; Infinity for answers that live until the epoch changes. */
  readonly deadline: number;
  readonly epoch: number;
  readonly id: number;
  readonly denied: boolean;
}

const setup = workerData as WorkerSetup;
const port = parentPort;
if (port === null) throw new Error('replay-worker.ts runs only as a worker thread');
const epochs = new Int32Array(setup.epoch);
const perSlot = Math.max(1, Math.floor(setup.maxEntries / ANSWER_SLOTS));
const slots = Array.from({ length: ANSWER_SLOTS }, () => new Map<string, Replayable>());
let cachedEpoch = Atomics.load(epochs, 0);
/** Replays since the last report, per answer: how many, and the first asker (its event names it). */
const replayed = new Map<number, { count: number; ip: string; port: number }>();
/** The refused-name bucket every thread takes from; without it refusals are never handed over. */
const refusals = setup.refusals === undefined ? undefined : createSharedTokenBucket(setup.refusals.state, setup.refusals.limits, sharedClock);
/** Refusals answered REFUSED over it since the last report, and the first one's name. */
let overLimit = 0;
let overLimitName: string | undefined;
/** Source ports of boundary's own upstream queries in flight: such a query is the main thread's to recognise. */
const ownPorts = setup.ownPorts === undefined ? undefined : new Uint32Array(setup.ownPorts);
const parse = createQueryParser();
const socket = createSocket({
  type: setup.family === 6 ? 'udp6' : 'udp4',
  recvBufferSize: UDP_RECEIVE_BUFFER_BYTES,
  lookup: (address, _options, callback) => callback(null, address, setup.family),
  ...({ reusePort: true } as object),
});
// Only a closed socket throws on send, and answers are flushed before it closes: nothing to report.
const replies = createUdpReplies(() => {});

/** The epoch now; answers of an older one are dropped, so a change costs the workers their whole cache at once. */
function currentEpoch(): number {
  const epoch = Atomics.load(epochs, 0);
  if (epoch !== cachedEpoch) {
    cachedEpoch = epoch;
    for (const slot of slots) slot.clear();
  }
  return epoch;
}

function report(): void {
  if (replayed.size === 0 && overLimit === 0) return;
  const counts = [...replayed].map(([id, r]) => ({ id, count: r.count, ip: r.ip, port: r.port }));
  replayed.clear();
  port?.postMessage({ t: 'counts', counts, overLimit, overLimitName });
  overLimit = 0;
  overLimitName = undefined;
}

function pass(message: Buffer, ip: string, sourcePort: number): void {
  port?.postMessage({ t: 'query', message, ip, port: sourcePort });
}

socket.on('message', (message, rinfo) => {
  if (ownPorts !== undefined && isOwnPort(ownPorts, rinfo.port)) return pass(message, rinfo.address, rinfo.port);
  const parsed = parse(message);
  if (parsed.kind !== 'query') return pass(message, rinfo.address, rinfo.port);
  const query = parsed.query;
  const entry = slots[answerSlot(query)]?.get(query.name);
  if (entry === undefined || entry.epoch !== currentEpoch()) return pass(message, rinfo.address, rinfo.port);
  let ttl: number | undefined;
  if (entry.deadline !== Number.POSITIVE_INFINITY) {
    // Floor, as the main thread does: a client never holds a synthetic answer past the mapping's expiry.
    ttl = Math.floor((entry.deadline - sharedClock()) / 1000);
    if (ttl < 1) return pass(message, rinfo.address, rinfo.port);
  }
  if (entry.denied) {
    if (refusals === undefined) return pass(message, rinfo.address, rinfo.port);
    // Over the rate, as on the main thread: REFUSED from the query alone, counted, no per-query event.
    if (!refusals.take()) {
      overLimit++;
      overLimitName ??= query.name;
      replies.send(socket, refusedFromQuery(query), rinfo.port, rinfo.address);
      return;
    }
  }
  replies.send(socket, respondFrom(entry.template, query, responseLimit(query, 'udp'), ttl), rinfo.port, rinfo.address);
  const tally = replayed.get(entry.id);
  if (tally === undefined) replayed.set(entry.id, { count: 1, ip: rinfo.address, port: rinfo.port });
  else tally.count++;
});
let listening = false;
let closing = false;
socket.on('error', (err: NodeJS.ErrnoException) => {
  // A send to a vanished asker must not end the thread; a failed bind ends it, and the main thread says why.
  if (listening) return;
  port.postMessage({ t: 'failed', message: err.message, code: err.code ?? '' });
  port.close();
});

const reporter = setInterval(report, DNS_WORKER_REPORT_INTERVAL_MS);

port.on('message', (message: ToWorker) => {
  if (message.t === 'entry') {
    if (message.epoch !== currentEpoch()) return;
    const slot = slots[message.slot];
    if (slot === undefined) return;
    if (slot.size >= perSlot && !slot.has(message.name)) slot.delete(slot.keys().next().value as string);
    const wire = Buffer.from(message.wire.buffer, message.wire.byteOffset, message.wire.byteLength);
    slot.set(message.name, {
      template: { wire, rcode: message.rcode, ttlOffset: message.ttlOffset },
      deadline: message.deadline,
      epoch: message.epoch,
      id: message.id,
      denied: message.denied,
    });
  } else if (message.t === 'sync') {
    report();
    port.postMessage({ t: 'synced', seq: message.seq });
  } else if (message.t === 'close' && !closing) {
    closing = true;
    clearInterval(reporter);
    replies.flush();
    socket.close(() => {
      report();
      port.postMessage({ t: 'closed' });
      port.close();
    });
  }
});

socket.bind({ address: setup.host, port: setup.port, exclusive: false }, () => {
  listening = true;
  port.postMessage({ t: 'listening' });
});
