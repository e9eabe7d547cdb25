// The bounded buffer of OCSF events waiting to go to the supervisor on POST /v1/events. Adding never
// blocks and never throws: when full, the event is dropped and counted. Knows nothing of HTTP/2.

export const MAX_BUFFERED_EVENTS = 1_024;
const MAX_EVENT_BATCH = 256;
const MAX_EVENT_BATCH_BYTES = 524_288;

interface EventBatch {
  /** The `events` message body, already serialised (each event stringified once, when it was added). */
  readonly body: string;
  readonly count: number;
  readonly dropped: number;
}

export interface EventBuffer {
  add(event: object): void;
  /** Takes the next batch (oldest first), or undefined when there is nothing to send. */
  take(): EventBatch | undefined;
  /** A batch could not be delivered: its events count as dropped. */
  failed(batch: EventBatch): void;
  /** A batch was delivered: the drops it reported are no longer owed. */
  delivered(batch: EventBatch): void;
  size(): number;
  stats(): { readonly sent: number; readonly dropped: number };
}

export function createEventBuffer(options: { maxEvents?: number; maxBatch?: number; maxBatchBytes?: number } = {}): EventBuffer {
  const maxEvents = options.maxEvents ?? MAX_BUFFERED_EVENTS;
  const maxBatch = options.maxBatch ?? MAX_EVENT_BATCH;
  const maxBatchBytes = options.maxBatchBytes ?? MAX_EVENT_BATCH_BYTES;
  let queue: string[] = [];
  let owedDrops = 0;
  let totalDropped = 0;
  let totalSent = 0;
  const drop = (n: number): void => {
    owedDrops += n;
    totalDropped += n;
  };
  return {
    add(event) {
      if (queue.length >= maxEvents) return drop(1);
      let json: string;
      try {
        json = JSON.stringify(event);
      } catch {
        return drop(1);
      }
      if (json === undefined || json.length > maxBatchBytes) return drop(1);
      queue.push(json);
    },
    take() {
      if (queue.length === 0 && owedDrops === 0) return undefined;
      let bytes = 0;
      let count = 0;
      while (count < queue.length && count < maxBatch && bytes + (queue[count]?.length ?? 0) <= maxBatchBytes) {
        bytes += (queue[count]?.length ?? 0) + 1;
        count += 1;
      }
      const taken = queue.slice(0, count);
      queue = queue.slice(count);
      const dropped = owedDrops;
      owedDrops = 0;
      return { body: `{"kind":"events","events":[${taken.join(',')}],"dropped":${dropped}}\n`, count, dropped };
    },
    failed(batch) {
      owedDrops += batch.dropped;
      drop(batch.count);
    },
    delivered(batch) {
      totalSent += batch.count;
    },
    size: () => queue.length,
    stats: () => ({ sent: totalSent, dropped: totalDropped }),
  };
}
