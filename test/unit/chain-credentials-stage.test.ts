import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createCredentialsStage } from '../../src/chain/stages/credentials.js';
import type { ChainRequest } from '../../src/chain/request.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';
import { hostHeader } from '../../src/http1/headers.js';

/** The fields of a forward GET the credentials stage reads, after the destination stage. */
function request(host: string, port: number, tls: boolean): ChainRequest {
  return {
    host,
    port,
    method: 'GET',
    target: '/',
    destination: { addresses: ['192.0.2.1'], tls },
    decision: undefined,
    framing: undefined,
    requestHeaders: undefined,
    wire: { httpVersion: '1.1', rawHeaders: ['Host', 'client.test', 'accept', '*/*'] },
  } as unknown as ChainRequest;
}

describe('credentials stage', () => {
  it('writes the Host of each request\'s own authority, whichever came before', () => {
    const stage = createCredentialsStage({ credentials: createStaticCredentialSource({ providers: [] }) });
    const sequence: [string, number, boolean][] = [
      ['a.test', 80, false],
      ['a.test', 80, false],
      ['a.test', 8080, false],
      ['a.test', 443, true],
      ['a.test', 443, false],
      ['b.test', 443, false],
      ['::1', 80, false],
      ['::1', 8443, true],
      ['a.test', 8080, false],
      ['a.test', 80, false],
    ];
    for (const [host, port, tls] of sequence) {
      const r = request(host, port, tls);
      assert.equal(stage.run(r), undefined);
      const headers = r.upstreamHeaders as string[];
      assert.deepEqual(headers.slice(0, 2), ['host', hostHeader(host, port, tls)], `${host} ${port} ${tls}`);
      assert.equal(headers.filter((h) => h.toLowerCase() === 'host').length, 1);
      // The client's own list is never the one that goes upstream.
      assert.notEqual(headers, r.wire.rawHeaders);
      assert.deepEqual(r.wire.rawHeaders, ['Host', 'client.test', 'accept', '*/*']);
    }
  });
});
