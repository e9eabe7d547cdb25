// The upstream proxy's values and its CONNECT handshake (docs/running.md#corporate-upstream-proxy): URL, auth file
// and bypass list parsing, which attempts a destination gets, and the answers a proxy can give, from scripted
// loopback proxies for the cases a real one will not produce (bytes after the head, a huge head, garbage, silence).

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { dialPinned, dialRefusalOf, type DialTarget, UpstreamProxyError } from '../../src/chain/dial.js';
import { createUpstreamProxyDial, PROXY_REPLY_HEAD_MAX_BYTES, type UpstreamProxySettings } from '../../src/chain/upstream-proxy-dial.js';
import { bypassesProxy, parseBypassList, parseProxyAuth, parseUpstreamProxyUrl } from '../../src/net/upstream-proxy.js';

function bypass(text: string) {
  const parsed = parseBypassList(text);
  assert.ok(parsed.ok, text);
  return parsed.value;
}

describe('upstream proxy URL', () => {
  it('takes http:// and https:// with a port', () => {
    assert.deepEqual(parseUpstreamProxyUrl('http://proxy.corp.example:3128'), { ok: true, value: { tls: false, host: 'proxy.corp.example', port: 3128 } });
    assert.deepEqual(parseUpstreamProxyUrl('https://10.0.0.1:443/'), { ok: true, value: { tls: true, host: '10.0.0.1', port: 443 } });
    assert.deepEqual(parseUpstreamProxyUrl('http://[fd00::1]:3128'), { ok: true, value: { tls: false, host: 'fd00::1', port: 3128 } });
  });

  it('refuses SOCKS, inline credentials, an empty value, a path and a missing port', () => {
    for (const text of ['', 'socks5://proxy:1080', 'socks://proxy:1080', 'http://user:pass@proxy:3128', 'http://proxy:3128/path', 'http://proxy', 'proxy:3128', 'ftp://proxy:21']) {
      assert.equal(parseUpstreamProxyUrl(text).ok, false, text);
    }
    const socks = parseUpstreamProxyUrl('socks5://proxy:1080');
    assert.ok(!socks.ok && /SOCKS/.test(socks.message));
  });
});

describe('upstream proxy auth file', () => {
  it('is user:pass, one trailing newline allowed, sent as Basic', () => {
    assert.deepEqual(parseProxyAuth('corp:s3cret\n'), { ok: true, value: `Basic ${Buffer.from('corp:s3cret').toString('base64')}` });
    assert.deepEqual(parseProxyAuth('corp:pa:ss'), { ok: true, value: `Basic ${Buffer.from('corp:pa:ss').toString('base64')}` });
  });

  it('refuses control characters, a missing user and a missing colon, without quoting the secret', () => {
    for (const text of ['corp:s3c\rret', 'corp:s3cret\n\n', 'corp:a\tb', ':s3cret', 'nocolon']) {
      const parsed = parseProxyAuth(text);
      assert.equal(parsed.ok, false, JSON.stringify(text));
      assert.ok(!parsed.ok && !parsed.message.includes('s3c'));
    }
  });
});

describe('--no-upstream-proxy', () => {
  it('a name entry covers the name and names under it, on label boundaries; a leading . or *. is the same entry', () => {
    for (const text of ['example.test', '.example.test', '*.example.test']) {
      const list = bypass(text);
      assert.equal(bypassesProxy(list, 'example.test', '192.0.2.1', 443), true);
      assert.equal(bypassesProxy(list, 'api.example.test', '192.0.2.1', 443), true);
      assert.equal(bypassesProxy(list, 'notexample.test', '192.0.2.1', 443), false);
      assert.equal(bypassesProxy(list, undefined, '192.0.2.1', 443), false);
    }
  });

  it('an IP or CIDR entry covers only the addresses inside it, whatever the name', () => {
    const list = bypass('10.0.0.0/8, 192.0.2.7, fd00::/8');
    assert.equal(bypassesProxy(list, 'api.example.test', '10.1.1.1', 443), true);
    assert.equal(bypassesProxy(list, 'api.example.test', '203.0.113.5', 443), false);
    assert.equal(bypassesProxy(list, undefined, '192.0.2.7', 80), true);
    assert.equal(bypassesProxy(list, undefined, 'fd00::5', 80), true);
    assert.equal(bypassesProxy(list, undefined, 'fe80::5', 80), false);
  });

  it('a :port narrows an entry to that port', () => {
    const list = bypass('internal.test:8443, 10.0.0.0/8:5432, [fd00::/8]:443');
    assert.equal(bypassesProxy(list, 'a.internal.test', '192.0.2.1', 8443), true);
    assert.equal(bypassesProxy(list, 'a.internal.test', '192.0.2.1', 443), false);
    assert.equal(bypassesProxy(list, undefined, '10.2.3.4', 5432), true);
    assert.equal(bypassesProxy(list, undefined, '10.2.3.4', 5433), false);
    assert.equal(bypassesProxy(list, undefined, 'fd00::1', 443), true);
  });

  it('refuses empty entries, bad CIDRs and ports, and *', () => {
    for (const text of ['', 'a.test,,b.test', '10.0.0.0/33', 'a.test:0', 'a.test:65536', '*', 'a b.test', '[fd00::/8]:x']) {
      assert.equal(parseBypassList(text).ok, false, text);
    }
  });
});

const SETTINGS: UpstreamProxySettings = {
  endpoint: { tls: false, host: '127.0.0.1', port: 1 },
  authorization: undefined,
  caPem: undefined,
  bypass: { entries: [] },
  connectByName: false,
};
const NO_RESOLVE = (): Promise<readonly string[]> => Promise.reject(new Error('no lookup expected'));

describe('upstream proxy attempts', () => {
  const attemptsOf = (settings: Partial<UpstreamProxySettings>, addresses: string[], name?: string): readonly DialTarget[] => {
    const dial = createUpstreamProxyDial({ ...SETTINGS, ...settings }, { direct: undefined, resolveProxy: NO_RESOLVE, now: () => 0 });
    return dial.attempts?.(addresses, 443, name) ?? [];
  };

  it('a CIDR entry lets only the addresses inside it go direct; the rest go through the proxy', () => {
    const attempts = attemptsOf({ bypass: bypass('10.0.0.0/8') }, ['10.1.1.1', '203.0.113.5'], 'api.example.test');
    assert.deepEqual(attempts, [
      { host: '10.1.1.1', port: 443, name: 'api.example.test' },
      { host: '203.0.113.5', port: 443, name: 'api.example.test', viaProxy: true },
    ]);
  });

  it('by name: one CONNECT for the name instead of one per address; an IP literal destination stays an IP', () => {
    assert.deepEqual(attemptsOf({ connectByName: true }, ['192.0.2.1', '192.0.2.2'], 'api.example.test'), [{ host: 'api.example.test', port: 443, name: 'api.example.test', viaProxy: true }]);
    assert.deepEqual(attemptsOf({ connectByName: true }, ['192.0.2.1'], '192.0.2.1'), [{ host: '192.0.2.1', port: 443, name: undefined, viaProxy: true }]);
  });
});

/** A scripted proxy: answers each connection's first bytes with `reply` (or nothing), and records what it read. */
async function scriptedProxy(reply: ((socket: Socket, request: string) => void) | undefined): Promise<{ port: number; requests: string[]; server: Server }> {
  const requests: string[] = [];
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n\r\n')) {
        requests.push(text);
        reply?.(socket, text);
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as { port: number }).port, requests, server };
}

describe('the CONNECT handshake', () => {
  const servers: Server[] = [];
  after(() => {
    for (const s of servers) s.close();
  });

  async function dialThrough(reply: ((socket: Socket, request: string) => void) | undefined, settings: Partial<UpstreamProxySettings> = {}, timeoutMs = 5_000) {
    const proxy = await scriptedProxy(reply);
    servers.push(proxy.server);
    const dial = createUpstreamProxyDial({ ...SETTINGS, endpoint: { tls: false, host: '127.0.0.1', port: proxy.port }, ...settings }, { direct: undefined, resolveProxy: NO_RESOLVE, now: () => performance.now() });
    const result = dial({ host: '192.0.2.10', port: 443, name: 'api.example.test', viaProxy: true }, timeoutMs);
    return { result, proxy };
  }

  it('sends CONNECT to the validated IP with Proxy-Authorization, and replays bytes that came after a 200 head', async () => {
    const { result, proxy } = await dialThrough((s) => s.write('HTTP/1.1 200 Connection established\r\nVia: test\r\n\r\nSSH-2.0-origin-speaks-first\r\n'), { authorization: 'Basic Y29ycDpzM2NyZXQ=' });
    const socket = await result;
    const [first] = (await once(socket, 'data')) as [Buffer];
    assert.equal(first.toString(), 'SSH-2.0-origin-speaks-first\r\n');
    socket.destroy();
    assert.equal(proxy.requests[0], 'CONNECT 192.0.2.10:443 HTTP/1.1\r\nHost: 192.0.2.10:443\r\nProxy-Authorization: Basic Y29ycDpzM2NyZXQ=\r\n\r\n');
  });

  it('a status other than 200 (407, 403, a 2xx that is not 200) is UPSTREAM_PROXY_REFUSED with the status', async () => {
    for (const status of [407, 403, 204]) {
      const { result } = await dialThrough((s) => s.end(`HTTP/1.1 ${status} No\r\nProxy-Authenticate: Basic realm="x"\r\n\r\n`));
      await assert.rejects(result, (err: unknown) => err instanceof UpstreamProxyError && err.code === 'UPSTREAM_PROXY_REFUSED' && err.proxyStatus === status);
    }
  });

  it('a head that is not HTTP/1.x, ends early, or passes PROXY_REPLY_HEAD_MAX_BYTES is UPSTREAM_PROXY_MALFORMED', async () => {
    const replies: ((s: Socket) => void)[] = [
      (s) => s.end('SSH-2.0-not-a-proxy\r\n\r\n'),
      (s) => s.end('HTTP/1.1 200 Connection established\r\n'),
      (s) => s.end(`HTTP/1.1 200 OK\r\nX-Pad: ${'a'.repeat(PROXY_REPLY_HEAD_MAX_BYTES)}\r\n\r\n`),
      (s) => s.write(`HTTP/1.1 200 OK\r\nX-Pad: ${'a'.repeat(PROXY_REPLY_HEAD_MAX_BYTES * 2)}`),
    ];
    for (const reply of replies) {
      const { result } = await dialThrough(reply);
      await assert.rejects(result, (err: unknown) => err instanceof UpstreamProxyError && err.code === 'UPSTREAM_PROXY_MALFORMED');
    }
  });

  it('a proxy that never answers is UPSTREAM_PROXY_TIMEOUT at the attempt\'s share', async () => {
    const { result } = await dialThrough(undefined, {}, 100);
    await assert.rejects(result, (err: unknown) => err instanceof UpstreamProxyError && err.code === 'UPSTREAM_PROXY_TIMEOUT');
  });

  it('a proxy named by a DNS name is resolved through the injected resolver; no address is UPSTREAM_PROXY_UNREACHABLE', async () => {
    const proxy = await scriptedProxy((s) => s.write('HTTP/1.1 200 OK\r\n\r\n'));
    servers.push(proxy.server);
    const asked: string[] = [];
    const dialVia = (addresses: readonly string[]) =>
      createUpstreamProxyDial(
        { ...SETTINGS, endpoint: { tls: false, host: 'proxy.corp.test', port: proxy.port } },
        {
          direct: undefined,
          resolveProxy: async (name) => {
            asked.push(name);
            return addresses;
          },
          now: () => performance.now(),
        },
      );
    const socket = await dialVia(['127.0.0.1'])({ host: '192.0.2.10', port: 443, viaProxy: true }, 5_000);
    socket.destroy();
    assert.deepEqual(asked, ['proxy.corp.test']);
    assert.equal(proxy.requests.length, 1);
    await assert.rejects(dialVia([])({ host: '192.0.2.10', port: 443, viaProxy: true }, 5_000), (err: unknown) => err instanceof UpstreamProxyError && err.code === 'UPSTREAM_PROXY_UNREACHABLE');
  });

  it('each failure becomes a 502 naming it, with the proxy status in the body and event facts', () => {
    const refused = dialRefusalOf('api.example.test:443', new UpstreamProxyError('UPSTREAM_PROXY_REFUSED', 'no', { proxyStatus: 407 }));
    assert.equal(refused.reason, 'upstream-proxy-refused');
    assert.equal(refused.failure, 'proxy-refused');
    assert.equal(refused.proxyStatus, 407);
    assert.equal(refused.denial.status, 502);
    assert.equal(refused.denial.error, 'upstream_proxy_refused');
    assert.equal((refused.denial.body as Record<string, unknown>).upstream_proxy_status, 407);
    assert.match(refused.denial.reasonPhrase, /407/);
    const timeout = dialRefusalOf('api.example.test:443', new UpstreamProxyError('UPSTREAM_PROXY_TIMEOUT', 'slow'));
    assert.equal(timeout.denial.status, 502);
    assert.equal(timeout.reason, 'upstream-proxy-timeout');
  });

  it('dialPinned tries the next validated address through the proxy after a refusal, and reports the last failure', async () => {
    let count = 0;
    const proxyReplies = await scriptedProxy((s) => {
      count += 1;
      s.write(count === 1 ? 'HTTP/1.1 502 Bad Gateway\r\n\r\n' : 'HTTP/1.1 200 OK\r\n\r\n');
    });
    servers.push(proxyReplies.server);
    const dial = createUpstreamProxyDial({ ...SETTINGS, endpoint: { tls: false, host: '127.0.0.1', port: proxyReplies.port } }, { direct: undefined, resolveProxy: NO_RESOLVE, now: () => performance.now() });
    const socket = await dialPinned({ addresses: ['192.0.2.1', '192.0.2.2'], port: 443, name: 'api.example.test', dial });
    socket.destroy();
    assert.deepEqual(proxyReplies.requests.map((r) => r.split('\r\n')[0]), ['CONNECT 192.0.2.1:443 HTTP/1.1', 'CONNECT 192.0.2.2:443 HTTP/1.1']);
  });
});
