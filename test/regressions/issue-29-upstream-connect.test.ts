// Issue 29 (a new user's first run): boundary ended with an uncaught ERR_SOCKET_BAD_PORT when a workload asked
// policy DNS for an allowed name while the upstream DNS server could not be reached (a laptop offline).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createUpstreamResolver } from '../../src/dns/upstream.js';

describe('issue 29: an upstream DNS server that cannot be connected to', () => {
  it('is a resolve failure (io-failed), not an exception out of the event loop', async () => {
    // A UDP connect() to the broadcast address fails at once (EACCES without SO_BROADCAST) and sends nothing:
    // the same callback path as ENETUNREACH on a machine without a route, on any host and without root.
    const resolver = createUpstreamResolver({ servers: [{ host: '255.255.255.255', port: 53 }], timeoutMs: 1_000 });
    const result = await resolver.resolve('api.example.test', 4);
    assert.equal(result.ok, false);
    assert.equal(!result.ok && result.failure, 'io-failed');
  });
});
