// boundary's own upstream DNS queries in flight, so that policy DNS can recognise one that came back to it
// (docs/dns.md#a-query-that-comes-back). A DNS redirect that does not exempt boundary's uid sends boundary's upstream
// query to its own policy DNS, which would resolve the name again through the same upstream, wait on itself until the
// upstream timeout and then answer SERVFAIL with the wrong reason. Shared by dns/upstream.ts, which adds each UDP
// exchange, and dns/policy-dns.ts, which asks about every query it receives.

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
}

interface Exchange {
  readonly id: number;
  readonly name: string;
  readonly onLoop: () => void;
}

export function createOwnQueries(): OwnQueries {
  // Each exchange has a socket of its own, so a port names at most one.
  const byPort = new Map<number, Exchange>();
  return {
    add(port, id, name, onLoop) {
      const exchange: Exchange = { id, name, onLoop };
      byPort.set(port, exchange);
      return () => {
        if (byPort.get(port) === exchange) byPort.delete(port);
      };
    },
    returned(port, id, name) {
      // Most queries arrive with nothing of boundary's own in flight: one size read, no lookup.
      if (byPort.size === 0) return false;
      const exchange = byPort.get(port);
      // The id and name too: a workload in another network namespace may ask from the same port number.
      if (exchange === undefined || exchange.id !== id || exchange.name !== name) return false;
      byPort.delete(port);
      exchange.onLoop();
      return true;
    },
  };
}
