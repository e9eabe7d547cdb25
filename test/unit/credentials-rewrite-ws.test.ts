import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rewriteWebSocketText } from '../../src/credentials/rewrite-ws.js';
import { scopeFor } from '../../src/credentials/scope.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';

const source = createStaticCredentialSource({
  providers: [
    { name: 'a', env: { WS_TOKEN: 'ws-secret' }, endpoints: [{ host: 'ws.example.test', port: 443 }] },
    { name: 'b', env: { ELSEWHERE: 'x-secret' }, endpoints: [{ host: 'b.example.test', port: 443 }] },
  ],
});
const scope = scopeFor({ source, host: 'ws.example.test', port: 443, path: '/socket' });

describe('rewriteWebSocketText', () => {
  it('substitutes a placeholder in a text frame when websocket_credential_rewrite is set', () => {
    const result = rewriteWebSocketText({ text: '{"auth":"openshell:resolve:env:WS_TOKEN"}', scope, rewrite: true });
    assert.deepEqual(result, { ok: true, text: '{"auth":"ws-secret"}', usedKeys: ['WS_TOKEN'] });
  });

  it('refuses a placeholder in a text frame when rewrite is off (CR-18)', () => {
    const result = rewriteWebSocketText({ text: 'openshell:resolve:env:WS_TOKEN', scope, rewrite: false });
    assert.deepEqual(result.ok ? 'ok' : [result.error, result.reason], ['credential_unavailable', 'leftover-marker']);
  });

  it('reports a key bound elsewhere as a mismatch, rewrite on or off', () => {
    for (const rewrite of [true, false]) {
      const result = rewriteWebSocketText({ text: 'openshell:resolve:env:ELSEWHERE', scope, rewrite });
      assert.deepEqual(result.ok ? 'ok' : [result.status, result.error], [403, 'credential_endpoint_mismatch']);
    }
  });

  it('refuses an encoded marker left after rewriting', () => {
    const result = rewriteWebSocketText({ text: 'openshell%3Aresolve%3Aenv%3AWS_TOKEN', scope, rewrite: true });
    assert.deepEqual(result.ok ? 'ok' : result.reason, 'leftover-marker');
  });

  it('passes frames without markers unchanged', () => {
    assert.deepEqual(rewriteWebSocketText({ text: 'hello', scope, rewrite: false }), { ok: true, text: 'hello', usedKeys: [] });
  });
});
