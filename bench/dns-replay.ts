// --dns-workers' replay workers for bench/dns-server.ts, bundled apart (dns-replay.mjs) and loaded only when asked for,
// so a BOUNDARY_REF build of dns-server.ts never needs a src/ that has them. Wired as app/boundary-transparent.ts does.

import { MAX_CACHED_ANSWERS } from '../src/dns/policy-dns.js';
import { createReplayWorkers } from '../src/dns/workers.js';
import type { ReplayFactory } from './dns-stack.js';

export function replayFactory(count: number): ReplayFactory {
  return ({ sink, pool, now, ownQueries }) =>
    createReplayWorkers({
      count,
      sink,
      now,
      pool,
      maxEntries: MAX_CACHED_ANSWERS,
      // A BOUNDARY_REF tree from before the workers' port check has no shared ports (and ignores the option).
      ...(typeof ownQueries?.sharedPorts === 'function' ? { ownPorts: ownQueries.sharedPorts() } : {}),
      onExit: (worker, code) => process.stderr.write(`replay worker ${worker} exited with ${code}\n`),
      onError: (err) => process.stderr.write(`replay worker error: ${String(err)}\n`),
    });
}
