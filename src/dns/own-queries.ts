// boundary's own upstream DNS queries in flight, so that policy DNS can recognise one that came back to it
// (docs/dns.md#a-query-that-comes-back). A DNS redirect that does not exempt boundary's uid sends boundary's upstream
// query to its own policy DNS, which would resolve the name again through the same upstream, wait on itself until the
// upstream timeout and then answer SERVFAIL with the wrong reason. Shared by dns/upstream.ts, which adds each UDP
// and TCP exchange, and dns/policy-dns.ts, which asks about every query it receives. Replay workers see only the UDP
// exchanges' source ports, in shared memory, and pass a query from one of them to the main thread, never replay it.

const PORTS = 65_536;
/** One bit per UDP port. */
const OWN_PORTS_WORDS = PORTS / 32;

export type Transport = 'udp' | 'tcp';

export interface OwnQueries {
  /**
   * An upstream exchange sent from local `port`: `returned` matching it calls `onLoop`. Returns the function that
   * forgets it, called when the exchange ends.
   */
  add(transport: Transport, port: number, id: number, name: string, onLoop: () => void): () => void;
  /**
   * True when a query with this transport, source port, id and lower-case name is one of boundary's own exchanges;
   * that exchange then fails at once through its `onLoop`, and the query must not be answered.
   */
  returned(transport: Transport, port: number, id: number, name: string): boolean;
  /** The UDP exchanges' source ports as a bitmap in shared memory (read with `isOwnPort`), made on the first call. */
  sharedPorts(): SharedArrayBuffer;
}

interface Exchange {
  readonly id: number;
  readonly name: string;
  readonly onLoop: () => void;
}

/** For a replay worker: whether one of boundary's own exchanges is in flight from this source port. */
export function isOwnPort(ports: Uint32Array, port: number): boolean {
  return (Atomics.load(ports, port >>> 5) & (1 << (port & 31))) !== 0;
}

/** UDP ports are keys 0-65535, TCP ports 65536 up: the two transports number their ports apart. */
function keyOf(transport: Transport, port: number): number {
  return transport === 'udp' ? port : PORTS + port;
}

export function createOwnQueries(): OwnQueries {
  // Each exchange has a socket of its own, so a transport's port names at most one.
  const byKey = new Map<number, Exchange>();
  let shared: Uint32Array | undefined;

  function mark(key: number): void {
    if (shared !== undefined && key < PORTS) Atomics.or(shared, key >>> 5, 1 << (key & 31));
  }
  function unmark(key: number): void {
    byKey.delete(key);
    if (shared !== undefined && key < PORTS) Atomics.and(shared, key >>> 5, ~(1 << (key & 31)));
  }

  return {
    add(transport, port, id, name, onLoop) {
      const key = keyOf(transport, port);
      const exchange: Exchange = { id, name, onLoop };
      byKey.set(key, exchange);
      mark(key);
      return () => {
        if (byKey.get(key) === exchange) unmark(key);
      };
    },
    returned(transport, port, id, name) {
      // Most queries arrive with nothing of boundary's own in flight: one size read, no lookup.
      if (byKey.size === 0) return false;
      const key = keyOf(transport, port);
      const exchange = byKey.get(key);
      // The id and name too: a workload in another network namespace may ask from the same port number.
      if (exchange === undefined || exchange.id !== id || exchange.name !== name) return false;
      unmark(key);
      exchange.onLoop();
      return true;
    },
    sharedPorts() {
      if (shared === undefined) {
        shared = new Uint32Array(new SharedArrayBuffer(OWN_PORTS_WORDS * Uint32Array.BYTES_PER_ELEMENT));
        for (const key of byKey.keys()) mark(key);
      }
      return shared.buffer as SharedArrayBuffer;
    },
  };
}
