// boundary's own upstream DNS queries in flight, so that policy DNS can recognise one that came back to it
// (docs/dns.md#a-query-that-comes-back). A DNS redirect that does not exempt boundary's uid sends boundary's upstream
// query to its own policy DNS, which would resolve the name again through the same upstream, wait on itself until the
// upstream timeout and then answer SERVFAIL with the wrong reason. Shared by dns/upstream.ts, which adds each UDP
// exchange, and dns/policy-dns.ts, which asks about every query it receives. Replay workers see only the exchanges'
// source ports, in shared memory, and pass a query from one of them to the main thread instead of replaying it.

/** One bit per UDP port. */
const OWN_PORTS_WORDS = 65_536 / 32;

export interface OwnQueries {
  /**
   * An upstream UDP exchange sent from local `port`: `returned` matching it calls `onLoop`. Returns the function that
   * forgets it, called when the exchange ends.
   */
  add(port: number, id: number, name: string, onLoop: () => void): () => void;
  /**
   * True when a query with this source port, id and lower-case name is one of boundary's own exchanges; that exchange
   * then fails at once through its `onLoop`, and the query must not be answered.
   */
  returned(port: number, id: number, name: string): boolean;
  /** The exchanges' source ports as a bitmap in shared memory (read with `isOwnPort`), made on the first call. */
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

export function createOwnQueries(): OwnQueries {
  // Each exchange has a socket of its own, so a port names at most one.
  const byPort = new Map<number, Exchange>();
  let shared: Uint32Array | undefined;

  function mark(port: number): void {
    if (shared !== undefined) Atomics.or(shared, port >>> 5, 1 << (port & 31));
  }
  function unmark(port: number): void {
    byPort.delete(port);
    if (shared !== undefined) Atomics.and(shared, port >>> 5, ~(1 << (port & 31)));
  }

  return {
    add(port, id, name, onLoop) {
      const exchange: Exchange = { id, name, onLoop };
      byPort.set(port, exchange);
      mark(port);
      return () => {
        if (byPort.get(port) === exchange) unmark(port);
      };
    },
    returned(port, id, name) {
      // Most queries arrive with nothing of boundary's own in flight: one size read, no lookup.
      if (byPort.size === 0) return false;
      const exchange = byPort.get(port);
      // The id and name too: a workload in another network namespace may ask from the same port number.
      if (exchange === undefined || exchange.id !== id || exchange.name !== name) return false;
      unmark(port);
      exchange.onLoop();
      return true;
    },
    sharedPorts() {
      if (shared === undefined) {
        shared = new Uint32Array(new SharedArrayBuffer(OWN_PORTS_WORDS * Uint32Array.BYTES_PER_ELEMENT));
        for (const port of byPort.keys()) mark(port);
      }
      return shared.buffer as SharedArrayBuffer;
    },
  };
}
