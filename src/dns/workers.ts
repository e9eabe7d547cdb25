// Policy DNS's replay workers, the main thread's side (docs/dns.md#replay-workers): N threads that each bind the DNS
// port with SO_REUSEPORT (replay-worker.ts). Hands them the answers policy DNS cached, refusals included once the
// refused-name bucket is shared, bumps the shared epoch before anything they may replay changes, serves what they
// pass on, merges their replay counts into the DNS events and their over-limit refusals into the rate limit's
// reports, and starts again a thread that dies (bounded). Workers never decide: only this thread's policy DNS makes
// answers.

import { createSocket } from 'node:dgram';
import { Worker } from 'node:worker_threads';
import { BoundaryError } from '../shared/errors.js';
import type { SyntheticPool } from '../net/synthetic.js';
import { createSharedTokenBucket, SHARED_BUCKET_BYTES } from '../net/token-bucket.js';
import type { AuditEvent, AuditSink } from '../telemetry/event.js';
import { type PreparedEvents, stamp } from './events.js';
import type { AnswerReplicas, CacheEntry } from './replicas.js';
import type { DnsServer } from './server.js';
import { type FromWorker, sharedClock, type ToWorker, type WorkerSetup } from './worker-protocol.js';

/** A worker not listening this long after it was started fails the start (or its restart). */
export const DNS_WORKER_BOOT_TIMEOUT_MS = 30_000;
/** A worker that has not closed its socket and reported this long after close() is ended. */
export const DNS_WORKER_CLOSE_TIMEOUT_MS = 5_000;
/** A worker that dies is started again at most this many times per window; past that its share goes to the others. */
export const MAX_DNS_WORKER_RESTARTS = 3;
export const DNS_WORKER_RESTART_WINDOW_MS = 60_000;
/** Answers handed to workers and not yet retired by an epoch change; past it the epoch is bumped (workers relearn). */
export const MAX_REPLAYED_ANSWERS = 16_384;

type EventBase = PreparedEvents['dns']['udp'];

interface ReplayWorkersOptions {
  readonly count: number;
  /** The DNS event sink (counted, then aggregated): replays go where the main thread's own answers go. */
  readonly sink: AuditSink;
  readonly now: () => number;
  /**
   * The synthetic pool: a mapping's expiry bumps the epoch. Workers stop replaying an answer on its own deadline
   * first; this also covers a wall clock (the injected `now`) that jumped ahead of the time workers measure.
   */
  readonly pool: Pick<SyntheticPool, 'subscribe'>;
  /** Answers each worker keeps. */
  readonly maxEntries: number;
  /** A worker died: `restarted` false once its restarts are spent. */
  readonly onExit: (worker: number, code: number, restarted: boolean) => void;
  readonly onError: (err: unknown) => void;
  /** Replays merged (a metric). */
  readonly onReplayed?: (count: number) => void;
  /** boundary's own upstream queries' source ports (dns/own-queries.ts): the workers pass on what comes from them. */
  readonly ownPorts?: SharedArrayBuffer;
  /** Starts a worker (default: replay-worker.ts). */
  readonly spawn?: (setup: WorkerSetup) => Worker;
}

export interface ReplayWorkers {
  readonly replicas: AnswerReplicas;
  /** Binds every worker on `server`'s address and port; settles once all of them listen. */
  start(server: DnsServer): Promise<void>;
  /** Before a change to anything a worker may replay (policy, mappings): no worker replays an older answer after it. */
  bump(): void;
  /** Workers whose socket is bound now. */
  running(): number;
  stats(): { readonly replayed: number; readonly passed: number };
  /** Closes every worker's socket and merges its last counts. */
  close(): Promise<void>;
}

/** In production the worker is dist/dns/replay-worker.js (app/ in the bundle); under tsx (tests) its source needs tsx's hooks. */
export function spawnReplayWorker(setup: WorkerSetup): Worker {
  const fromSource = import.meta.url.endsWith('.ts');
  const entry = new URL(`./replay-worker.${fromSource ? 'ts' : 'js'}`, import.meta.url);
  if (!fromSource) return new Worker(entry, { workerData: setup });
  // tsx's loader hooks do not reach a worker's entry through execArgv on Node 20; register them inside.
  const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(boot, { eval: true, workerData: setup });
}

/**
 * Refuses `--dns-workers` where this Node's dgram cannot share a port (Node 20 ignores `reusePort`): two sockets
 * with it on one loopback port must both bind. Never falls back to one thread silently.
 */
export async function assertReusePort(family: 4 | 6): Promise<void> {
  const type = family === 6 ? 'udp6' : 'udp4';
  const host = family === 6 ? '::1' : '127.0.0.1';
  const bind = (port: number) =>
    new Promise<ReturnType<typeof createSocket>>((resolve, reject) => {
      const socket = createSocket({ type, ...({ reusePort: true } as object) });
      socket.once('error', (err) => {
        socket.close();
        reject(err);
      });
      socket.bind({ port, address: host, exclusive: false }, () => resolve(socket));
    });
  const first = await bind(0);
  try {
    (await bind(first.address().port)).close();
  } catch (err) {
    throw new BoundaryError(
      'DNS_WORKERS_UNSUPPORTED',
      `--dns-workers needs UDP sockets that share a port (SO_REUSEPORT), which the dgram of Node ${process.version} cannot bind; run it on Node 22.12 or later (the image's), or without --dns-workers`,
      { cause: err },
    );
  } finally {
    first.close();
  }
}

export function createReplayWorkers(options: ReplayWorkersOptions): ReplayWorkers {
  const { sink, now } = options;
  const spawn = options.spawn ?? spawnReplayWorker;
  const epochs = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
  const threads: (Worker | undefined)[] = new Array(options.count).fill(undefined);
  const restarts: number[][] = Array.from({ length: options.count }, () => []);
  /** Answers handed out, by id, until an epoch change retires them and every worker has reported past it. */
  const handed = new Map<number, { readonly base: EventBase; readonly refuse: EventBase | undefined; readonly epoch: number }>();
  /** The refused-name bucket's state and limits once policy DNS shares them, and where over-limit counts go. */
  let refusals: { readonly setup: NonNullable<WorkerSetup['refusals']>; readonly overLimit: (count: number, name: string | undefined) => void } | undefined;
  const ids = new WeakMap<CacheEntry, number>();
  /** Outstanding syncs: the epoch they retire below, and the workers yet to report. */
  const syncs = new Map<number, { readonly epoch: number; readonly waiting: Set<number> }>();
  let nextId = 1;
  let nextSeq = 1;
  let syncScheduled = false;
  let server: DnsServer | undefined;
  let closing = false;
  let closed: Promise<void> | undefined;
  let replayed = 0;
  let passed = 0;
  /** Workers whose socket is bound, by index. */
  const listening = new Set<number>();
  const unfollow = options.pool.subscribe((event) => {
    if (event.kind === 'expired') bump();
  });

  function post(index: number, message: ToWorker): void {
    threads[index]?.postMessage(message);
  }

  function settleSyncs(): void {
    for (const [seq, sync] of syncs) {
      if (sync.waiting.size > 0) continue;
      syncs.delete(seq);
      for (const [id, answer] of handed) if (answer.epoch < sync.epoch) handed.delete(id);
    }
  }

  /** Once per turn after a bump: every worker reports, then the answers of older epochs are forgotten. */
  function scheduleSync(): void {
    if (syncScheduled) return;
    syncScheduled = true;
    setImmediate(() => {
      syncScheduled = false;
      const seq = nextSeq++;
      const waiting = new Set<number>();
      threads.forEach((thread, index) => {
        if (thread === undefined) return;
        waiting.add(index);
        post(index, { t: 'sync', seq });
      });
      syncs.set(seq, { epoch: Atomics.load(epochs, 0), waiting });
      settleSyncs();
    });
  }

  function bump(): void {
    Atomics.add(epochs, 0, 1);
    scheduleSync();
  }

  function merge(report: Extract<FromWorker, { t: 'counts' }>): void {
    let merged = 0;
    for (const c of report.counts) {
      const answer = handed.get(c.id);
      // Never: an answer stays known until every worker reported past its epoch.
      if (answer === undefined) continue;
      merged += c.count;
      // The events of each replay, as the main thread emits them per answer (a refusal's NET:REFUSE first): metrics
      // count each, the aggregate counts repeats.
      const from = { ip: c.ip, port: c.port };
      const refuse = answer.refuse === undefined ? undefined : stamp(answer.refuse, from);
      const event: AuditEvent = stamp(answer.base, from);
      for (let i = 0; i < c.count; i++) {
        if (refuse !== undefined) sink.emit(refuse);
        sink.emit(event);
      }
    }
    replayed += merged;
    options.onReplayed?.(merged);
    if (report.overLimit > 0) refusals?.overLimit(report.overLimit, report.overLimitName);
  }

  function launch(index: number): Promise<void> {
    const target = server;
    if (target === undefined) return Promise.resolve();
    const address = target.address();
    const setup: WorkerSetup = {
      host: address.host,
      port: address.port,
      family: address.host.includes(':') ? 6 : 4,
      epoch: epochs.buffer as SharedArrayBuffer,
      maxEntries: options.maxEntries,
      ...(refusals === undefined ? {} : { refusals: refusals.setup }),
      ...(options.ownPorts === undefined ? {} : { ownPorts: options.ownPorts }),
    };
    const worker = spawn(setup);
    threads[index] = worker;
    return new Promise<void>((resolve, reject) => {
      let bound = false;
      const boot = setTimeout(() => {
        reject(new Error(`policy DNS worker ${index} was not listening after ${DNS_WORKER_BOOT_TIMEOUT_MS} ms`));
        void worker.terminate();
      }, DNS_WORKER_BOOT_TIMEOUT_MS);
      boot.unref();
      worker.on('message', (message: FromWorker) => {
        if (message.t === 'query') {
          passed++;
          target.serveDatagram(Buffer.from(message.message.buffer, message.message.byteOffset, message.message.byteLength), { ip: message.ip, port: message.port }, index);
        } else if (message.t === 'counts') {
          merge(message);
        } else if (message.t === 'synced') {
          syncs.get(message.seq)?.waiting.delete(index);
          settleSyncs();
        } else if (message.t === 'listening') {
          bound = true;
          listening.add(index);
          clearTimeout(boot);
          resolve();
        } else if (message.t === 'failed') {
          clearTimeout(boot);
          reject(new Error(`policy DNS worker ${index} could not bind ${address.host}:${address.port}: ${message.message} (${message.code})`));
        }
      });
      worker.on('error', (err) => options.onError(err));
      worker.on('exit', (code) => {
        clearTimeout(boot);
        if (threads[index] !== worker) return;
        threads[index] = undefined;
        listening.delete(index);
        for (const sync of syncs.values()) sync.waiting.delete(index);
        settleSyncs();
        if (!bound) {
          reject(new Error(`policy DNS worker ${index} exited with code ${code} before listening`));
          return;
        }
        if (closing) return;
        // The kernel hands its share of the port to the other sockets at once; the thread comes back, a few times.
        const at = now();
        const recent = restarts[index]!.filter((t) => at - t < DNS_WORKER_RESTART_WINDOW_MS);
        const again = recent.length < MAX_DNS_WORKER_RESTARTS;
        if (again) recent.push(at);
        restarts[index] = recent;
        options.onExit(index, code, again);
        if (again) launch(index).catch((err: unknown) => options.onError(err));
      });
    });
  }

  const replicas: AnswerReplicas = {
    epoch: () => Atomics.load(epochs, 0),
    publish(slot, name, entry, to) {
      // A refusal stays with the main thread until the bucket its rate is charged to is shared, and so does any answer
      // of an older epoch.
      if ((refusals === undefined && (entry.denied || entry.events.refuse !== undefined)) || entry.epoch !== Atomics.load(epochs, 0)) return;
      let id = ids.get(entry);
      if (id === undefined) {
        if (handed.size >= MAX_REPLAYED_ANSWERS) {
          bump();
          return;
        }
        id = nextId++;
        ids.set(entry, id);
        handed.set(id, { base: entry.events.dns.udp, refuse: entry.events.refuse, epoch: entry.epoch });
      }
      const deadline = entry.until === Number.POSITIVE_INFINITY ? Number.POSITIVE_INFINITY : sharedClock() + (entry.until - now());
      const message: ToWorker = {
        t: 'entry',
        slot,
        name,
        wire: entry.template.wire,
        rcode: entry.template.rcode,
        ttlOffset: entry.template.ttlOffset,
        denied: entry.denied,
        deadline,
        epoch: entry.epoch,
        id,
      };
      if (to !== undefined) post(to, message);
      else for (let i = 0; i < threads.length; i++) post(i, message);
    },
    shareRefusals(limits, overLimit) {
      // Called once, by policy DNS, which is built before start(): every worker is launched with the bucket. (A worker
      // launched without it would only pass refusals on.)
      const state = new SharedArrayBuffer(SHARED_BUCKET_BYTES);
      refusals = { setup: { state, limits }, overLimit };
      return createSharedTokenBucket(state, limits, sharedClock);
    },
  };

  return {
    replicas,
    async start(target) {
      server = target;
      await Promise.all(threads.map((_, index) => launch(index)));
    },
    bump,
    running: () => listening.size,
    stats: () => ({ replayed, passed }),
    close() {
      closed ??= closeAll();
      return closed;
    },
  };

  async function closeAll(): Promise<void> {
    closing = true;
    unfollow();
    await Promise.all(
      threads.map(async (worker, index) => {
        if (worker === undefined) return;
        const done = new Promise<void>((resolve) => {
          worker.on('message', (message: FromWorker) => {
            if (message.t === 'closed') resolve();
          });
          worker.once('exit', () => resolve());
        });
        post(index, { t: 'close' });
        const timer = setTimeout(() => void worker.terminate(), DNS_WORKER_CLOSE_TIMEOUT_MS);
        await done;
        clearTimeout(timer);
      }),
    );
  }
}
