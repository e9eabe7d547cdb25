import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeBasic, type HeaderPair, type HeadRewrite, rewriteRequestHead } from '../../src/credentials/rewrite-head.js';
import { type CredentialScope, scopeFor } from '../../src/credentials/scope.js';
import { Secret } from '../../src/credentials/secret.js';
import { createStaticCredentialSource } from '../../src/credentials/source.js';

const API = 'tok-Acme_123';
const source = createStaticCredentialSource({
  providers: [
    {
      name: 'acme',
      env: {
        API_TOKEN: API,
        BASIC_PASS: 'p@ss:w0rd',
        QUERY_VALUE: 'a b&c=d+é',
        PATH_SLASH: 'a/b',
        PATH_BACKSLASH: 'a\\b',
        PATH_QUESTION: 'a?b',
        PATH_HASH: 'a#b',
        PATH_DOTS: 'a..b',
      },
      endpoints: [{ host: 'api.example.test', port: 443 }],
    },
    { name: 'other', env: { OTHER_TOKEN: 'other-secret-999' }, endpoints: [{ host: 'other.example.test', port: 443 }] },
  ],
});

const ph = (key: string) => `openshell:resolve:env:${key}`;
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

interface Req {
  path?: string;
  query?: string;
  headers?: HeaderPair[];
  host?: string | undefined;
  scope?: CredentialScope;
}

function rewrite(req: Req): HeadRewrite {
  const path = req.path ?? '/';
  const host = 'host' in req ? req.host : 'api.example.test';
  const scope = req.scope ?? scopeFor({ source, host, port: 443, path });
  return rewriteRequestHead({ method: 'GET', path, query: req.query, headers: req.headers ?? [], scope });
}

function ok(result: HeadRewrite) {
  assert.ok(result.ok, result.ok ? '' : `${result.error}: ${result.message}`);
  return result;
}

function header(result: HeadRewrite, name: string): string[] {
  return ok(result).headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
}

describe('rewriteRequestHead: substitution slots', () => {
  it('puts the real value in Authorization: Bearer and keeps exactly one Authorization header (CR-05)', () => {
    const result = rewrite({ headers: [['Host', 'api.example.test'], ['Authorization', `Bearer ${ph('API_TOKEN')}`]] });
    assert.deepEqual(header(result, 'authorization'), [`Bearer ${API}`]);
    assert.deepEqual(ok(result).usedKeys, ['API_TOKEN']);
    assert.equal(ok(result).headers.length, 2);
  });

  it('replaces a header whose whole value is the placeholder', () => {
    assert.deepEqual(header(rewrite({ headers: [['x-api-key', ph('API_TOKEN')]] }), 'x-api-key'), [API]);
  });

  it('replaces the credentials of any auth scheme (`token <ph>`)', () => {
    assert.deepEqual(header(rewrite({ headers: [['Authorization', `token ${ph('API_TOKEN')}`]] }), 'authorization'), [
      `token ${API}`,
    ]);
  });

  it('replaces a whole-token alias, prefix included', () => {
    const result = rewrite({ headers: [['Authorization', 'Bearer sk-proj-OPENSHELL-RESOLVE-ENV-API_TOKEN']] });
    assert.deepEqual(header(result, 'authorization'), [`Bearer ${API}`]);
  });

  it('decodes Basic credentials, resolves the password and encodes them again (CR-06)', () => {
    const result = rewrite({ headers: [['Authorization', `Basic ${b64(`alice:${ph('BASIC_PASS')}`)}`]] });
    assert.deepEqual(header(result, 'authorization'), [`Basic ${b64('alice:p@ss:w0rd')}`]);
  });

  it('resolves a Basic user name, but refuses a value with a colon there', () => {
    const user = rewrite({ headers: [['Authorization', `Basic ${b64(`${ph('API_TOKEN')}:x`)}`]] });
    assert.deepEqual(header(user, 'authorization'), [`Basic ${b64(`${API}:x`)}`]);
    const colon = rewrite({ headers: [['Authorization', `Basic ${b64(`${ph('BASIC_PASS')}:x`)}`]] });
    assert.deepEqual(colon.ok ? 'ok' : [colon.status, colon.error, colon.reason], [500, 'credential_unavailable', 'unsafe-value']);
  });

  it('substitutes a path segment, whole or embedded, percent-encoded for the segment (CR-07)', () => {
    assert.equal(ok(rewrite({ path: `/bot${ph('API_TOKEN')}/send` })).path, `/bot${API}/send`);
    assert.equal(ok(rewrite({ path: `/v1/${ph('QUERY_VALUE')}` })).path, '/v1/a%20b%26c%3Dd%2B%C3%A9');
  });

  it('substitutes query values, whole or embedded, percent-encoded except unreserved (CR-07)', () => {
    const result = ok(rewrite({ query: `a=1&key=${ph('QUERY_VALUE')}&b=pre-${ph('API_TOKEN')}-post&c` }));
    assert.equal(result.query, `a=1&key=a%20b%26c%3Dd%2B%C3%A9&b=pre-${API}-post&c`);
    assert.deepEqual(result.usedKeys, ['API_TOKEN', 'QUERY_VALUE']);
  });

  it('substitutes every slot of one request at once', () => {
    const result = ok(
      rewrite({
        path: `/x/${ph('API_TOKEN')}`,
        query: `k=${ph('API_TOKEN')}`,
        headers: [['Authorization', `Bearer ${ph('API_TOKEN')}`]],
      }),
    );
    assert.equal(result.path, `/x/${API}`);
    assert.equal(result.query, `k=${API}`);
    assert.deepEqual(result.usedKeys, ['API_TOKEN']);
  });

  it('leaves a request without placeholders untouched', () => {
    const headers: HeaderPair[] = [['Accept', 'application/json'], ['Authorization', 'Bearer real-token-of-the-workload']];
    const result = ok(rewrite({ path: '/a/b', query: 'x=1', headers }));
    assert.deepEqual([result.path, result.query, result.headers, result.usedKeys], ['/a/b', 'x=1', headers, []]);
  });
});

describe('rewriteRequestHead: refusals', () => {
  const encoded = 'openshell%3Aresolve%3Aenv%3AAPI_TOKEN';
  const table: [string, Req, number, string, string][] = [
    ['a key bound to another host in a header (CR-11)', { headers: [['Authorization', `Bearer ${ph('OTHER_TOKEN')}`]] }, 403, 'credential_endpoint_mismatch', 'endpoint-mismatch'],
    ['a key bound to another host in the path', { path: `/${ph('OTHER_TOKEN')}` }, 403, 'credential_endpoint_mismatch', 'endpoint-mismatch'],
    ['a key bound to another host in the query', { query: `t=${ph('OTHER_TOKEN')}` }, 403, 'credential_endpoint_mismatch', 'endpoint-mismatch'],
    ['a key bound elsewhere in an unsupported header shape', { headers: [['Cookie', `s=${ph('OTHER_TOKEN')}`]] }, 403, 'credential_endpoint_mismatch', 'endpoint-mismatch'],
    ['a mismatch together with an unknown key', { headers: [['A', ph('NOPE')], ['B', ph('OTHER_TOKEN')]] }, 403, 'credential_endpoint_mismatch', 'endpoint-mismatch'],
    ['an alias of a key bound elsewhere', { headers: [['x-api-key', 'sk-OPENSHELL-RESOLVE-ENV-OTHER_TOKEN']] }, 403, 'credential_endpoint_mismatch', 'endpoint-mismatch'],
    ['a Basic password bound elsewhere', { headers: [['Authorization', `Basic ${b64(`u:${ph('OTHER_TOKEN')}`)}`]] }, 403, 'credential_endpoint_mismatch', 'endpoint-mismatch'],
    ['an unknown key (CR-10)', { headers: [['Authorization', `Bearer ${ph('NOPE')}`]] }, 500, 'credential_unavailable', 'unknown-key'],
    ['an unknown key in the path', { path: `/${ph('NOPE')}` }, 500, 'credential_unavailable', 'unknown-key'],
    ['an alias of an unknown key', { headers: [['x-api-key', 'sk-OPENSHELL-RESOLVE-ENV-NOPE']] }, 500, 'credential_unavailable', 'leftover-marker'],
    ['a percent-encoded placeholder in the path (CR-10)', { path: `/v1/${encoded}` }, 500, 'credential_unavailable', 'leftover-marker'],
    ['a percent-encoded placeholder in the query (CR-10)', { query: `k=${encoded}` }, 500, 'credential_unavailable', 'leftover-marker'],
    ['a double-encoded placeholder in the query', { query: 'k=openshell%253Aresolve%253Aenv%253AAPI_TOKEN' }, 500, 'credential_unavailable', 'leftover-marker'],
    ['a percent-encoded placeholder in a header', { headers: [['X-Token', encoded]] }, 500, 'credential_unavailable', 'leftover-marker'],
    ['an upper-case marker', { headers: [['X-Token', ph('API_TOKEN').toUpperCase()]] }, 500, 'credential_unavailable', 'leftover-marker'],
    ['a placeholder in an unsupported header shape', { headers: [['Cookie', `s=${ph('API_TOKEN')}`]] }, 500, 'credential_unavailable', 'leftover-marker'],
    ['a placeholder in a header name', { headers: [[ph('API_TOKEN'), 'x']] }, 500, 'credential_unavailable', 'leftover-marker'],
    ['a placeholder in a query key', { query: `${ph('API_TOKEN')}=1` }, 500, 'credential_unavailable', 'leftover-marker'],
    ['an encoded marker inside Basic credentials', { headers: [['Authorization', `Basic ${b64(`u:${encoded}`)}`]] }, 500, 'credential_unavailable', 'leftover-marker'],
    ['a marker with no key', { headers: [['X-Token', 'openshell:resolve:env:']] }, 500, 'credential_unavailable', 'leftover-marker'],
    ['a path value with / (CR-08)', { path: `/${ph('PATH_SLASH')}/x` }, 500, 'credential_unavailable', 'path-unsafe-value'],
    ['a path value with \\ (CR-08)', { path: `/${ph('PATH_BACKSLASH')}` }, 500, 'credential_unavailable', 'path-unsafe-value'],
    ['a path value with ? (CR-08)', { path: `/${ph('PATH_QUESTION')}` }, 500, 'credential_unavailable', 'path-unsafe-value'],
    ['a path value with # (CR-08)', { path: `/${ph('PATH_HASH')}` }, 500, 'credential_unavailable', 'path-unsafe-value'],
    ['a path value with .. (CR-08)', { path: `/${ph('PATH_DOTS')}` }, 500, 'credential_unavailable', 'path-unsafe-value'],
    ['a marker on a request without an authority (CR-20)', { host: undefined, headers: [['Authorization', `Bearer ${ph('API_TOKEN')}`]] }, 500, 'credential_unavailable', 'no-authority'],
    ['an encoded marker on a request without an authority', { host: undefined, headers: [['X-T', encoded]] }, 500, 'credential_unavailable', 'no-authority'],
    ['a second Authorization header next to a placeholder', { headers: [['Authorization', `Bearer ${ph('API_TOKEN')}`], ['authorization', 'Bearer x']] }, 500, 'credential_unavailable', 'multiple-authorization'],
  ];
  for (const [name, req, status, error, reason] of table) {
    it(`refuses ${name} with ${status} ${error}`, () => {
      const result = rewrite(req);
      assert.ok(!result.ok, 'expected a refusal');
      assert.deepEqual([result.status, result.error, result.reason], [status, error, reason]);
      for (const secret of [API, 'other-secret-999', 'p@ss:w0rd']) {
        assert.ok(!result.message.includes(secret) && !result.logMessage.includes(secret));
      }
      assert.ok(!/[A-Z]+_[A-Z]+|openshell/i.test(result.logMessage), result.logMessage);
    });
  }

  it('lets a request without an authority through when it holds no marker', () => {
    assert.ok(rewrite({ host: undefined, headers: [['Accept', '*/*']] }).ok);
  });

  it('refuses a resolved value with CR, LF or NUL instead of writing it (CR-09)', () => {
    for (const bad of ['a\r\nInjected: 1', 'a\nb', 'a\u0000b']) {
      const scope: CredentialScope = {
        revision: 1,
        hasResolver: true,
        boundKeys: ['K'],
        resolve: () => ({ kind: 'value', secret: new Secret(bad) }),
        keyExists: () => true,
        stillCurrent: () => true,
        secrets: () => [],
        placements: () => [],
      };
      const result = rewrite({ scope, headers: [['x-api-key', ph('K')]] });
      assert.deepEqual(result.ok ? 'ok' : [result.status, result.reason], [500, 'unsafe-value']);
    }
  });

  it('refuses a placeholder once the credential revision changed after the scope was built (CR-21)', () => {
    const rotating = createStaticCredentialSource({ providers: [{ name: 'p', env: { K: 'v1' }, endpoints: [{ host: 'h.test', port: 443 }] }] });
    const scope = scopeFor({ source: rotating, host: 'h.test', port: 443, path: '/' });
    rotating.replace([{ name: 'p', env: { K: 'v2' }, endpoints: [{ host: 'h.test', port: 443 }] }]);
    const used = rewrite({ scope, headers: [['x-api-key', ph('K')]] });
    assert.deepEqual(used.ok ? 'ok' : [used.status, used.error, used.reason], [500, 'credential_unavailable', 'stale-revision']);
    assert.ok(rewrite({ scope, headers: [['Accept', '*/*']] }).ok);
  });
});

describe('decodeBasic', () => {
  // What decodeBasic read before its quick check on `basic `: the scheme regex alone, on the trimmed value.
  const byRegex = (value: string): string | undefined => {
    const match = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*) +(\S+)$/.exec(value.trim());
    if (match === null || match[1]?.toLowerCase() !== 'basic' || !/^[A-Za-z0-9+/]+={0,2}$/.test(match[2] ?? '')) return undefined;
    return Buffer.from(match[2] ?? '', 'base64').toString('utf8');
  };

  it('reads Basic in any case, with spaces around or between, and nothing else', () => {
    const token = b64('user:pass');
    const values = [
      `Basic ${token}`, `basic ${token}`, `BASIC ${token}`, `bAsIc ${token}`, `  Basic ${token}  `, `Basic   ${token}`,
      `\tBasic ${token}\t`, `Basic\t${token}`, `Basic\u00a0${token}`, `Basicx ${token}`, `Basi ${token}`, `Bearer ${token}`,
      `Basic ${token} extra`, `Basic ${token}!`, 'Basic ', 'Basic  ', 'Basic', `${token}`, '', ' ', `\u00a0Basic ${token}`,
      `Ba\u0073ic ${token}`, `Bas\u0131c ${token}`, `Basic\u2003${token}`, 'Basic a', `basic ${token}==`,
    ];
    for (const value of values) assert.equal(decodeBasic(value), byRegex(value), JSON.stringify(value));
    assert.equal(decodeBasic(`  bAsIc ${token} `), 'user:pass');
  });
});
