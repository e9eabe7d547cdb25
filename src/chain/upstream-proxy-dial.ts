// The dial through the corporate upstream proxy (docs/running.md#corporate-upstream-proxy): per validated address, a
// connection to the proxy (TLS for https://), `CONNECT <address>:<port>`, and only a 200 opens the tunnel. Bypassed
// addresses are dialled directly. Never resolves a destination: only the proxy's own name goes to `resolveProxy`.

import { isIP, type Socket } from 'node:net';
import type { SecureContext } from 'node:tls';
import { connect as tlsConnect, createSecureContext, nodeRootsWith } from '../shared/node-tls.js';
import { formatAuthority } from '../net/host.js';
import { type BypassList, bypassesProxy, type UpstreamProxyEndpoint } from '../net/upstream-proxy.js';
import { type DialFunction, type DialTarget, netDial, rememberTunnelTarget, UpstreamProxyError } from './dial.js';

/** Bytes of the proxy's answer head to a CONNECT; a longer head fails the dial (UPSTREAM_PROXY_MALFORMED). */
export const PROXY_REPLY_HEAD_MAX_BYTES = 8_192;
/** Every attempt of one destination through the proxy shares this, split evenly over the attempts left. */
export const UPSTREAM_PROXY_DIAL_BUDGET_MS = 30_000;

const HEAD_END = Buffer.from('\r\n\r\n');
const STATUS_LINE = /^HTTP\/1\.[01] ([0-9]{3})(?: [^\r\n]*)?$/;

export interface UpstreamProxySettings {
  readonly endpoint: UpstreamProxyEndpoint;
  /** `Basic ...` from the auth file; undefined: no Proxy-Authorization header. */
  readonly authorization: string | undefined;
  /** Trusted for the proxy's own TLS, beside the system roots. */
  readonly caPem: string | undefined;
  readonly bypass: BypassList;
  /** CONNECT by the destination's name instead of each validated address (the proxy's own answer is then not pinned). */
  readonly connectByName: boolean;
}

export function createUpstreamProxyDial(
  settings: UpstreamProxySettings,
  deps: {
    /** Direct dials (bypassed addresses and the proxy itself); net.connect when undefined. */
    readonly direct: DialFunction | undefined;
    /** The proxy's own name -> addresses (never a destination's). */
    readonly resolveProxy: (name: string) => Promise<readonly string[]>;
    readonly now: () => number;
  },
): DialFunction {
  const { endpoint, authorization, bypass, connectByName } = settings;
  // Built once: parsing the system roots per connection would dominate the handshake.
  const secureContext: SecureContext | undefined = endpoint.tls
    ? createSecureContext({ ca: nodeRootsWith(settings.caPem) })
    : undefined;
  const direct = (target: DialTarget, timeoutMs: number): Promise<Socket> => (deps.direct === undefined ? netDial(target, timeoutMs) : deps.direct(target, timeoutMs));

  function attempts(addresses: readonly string[], port: number, rawName: string | undefined): readonly DialTarget[] {
    const name = rawName !== undefined && isIP(rawName) === 0 ? rawName : undefined;
    const out: DialTarget[] = [];
    let byName = false;
    for (const host of addresses) {
      if (bypassesProxy(bypass, name, host, port)) out.push({ host, port, name });
      else if (!connectByName || name === undefined) out.push({ host, port, name, viaProxy: true });
      else if (!byName) {
        // By name the proxy resolves and picks an address itself: one CONNECT covers them all.
        byName = true;
        out.push({ host: name, port, name, viaProxy: true });
      }
    }
    return out;
  }

  async function proxyAddresses(): Promise<readonly string[]> {
    if (isIP(endpoint.host) !== 0) return [endpoint.host];
    try {
      const found = await deps.resolveProxy(endpoint.host);
      if (found.length > 0) return found;
    } catch (err) {
      throw new UpstreamProxyError('UPSTREAM_PROXY_UNREACHABLE', `cannot resolve the upstream proxy ${endpoint.host}: ${(err as Error).message}`, { cause: err });
    }
    throw new UpstreamProxyError('UPSTREAM_PROXY_UNREACHABLE', `the upstream proxy ${endpoint.host} has no address`);
  }

  async function openProxy(timeoutMs: number): Promise<Socket> {
    let last: unknown;
    for (const host of await proxyAddresses()) {
      try {
        return await direct({ host, port: endpoint.port }, timeoutMs);
      } catch (err) {
        last = err;
      }
    }
    const where = formatAuthority(endpoint.host, endpoint.port);
    throw new UpstreamProxyError('UPSTREAM_PROXY_UNREACHABLE', `upstream proxy ${where}: ${(last as Error | undefined)?.message ?? 'no address'}`, { cause: last });
  }

  function secure(socket: Socket): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const literal = isIP(endpoint.host) !== 0;
      const tlsSocket = tlsConnect({ socket, secureContext, ...(literal ? { host: endpoint.host } : { servername: endpoint.host }) });
      tlsSocket.once('error', (err) => {
        socket.destroy();
        reject(new UpstreamProxyError('UPSTREAM_PROXY_UNREACHABLE', `upstream proxy TLS: ${err.message}`, { cause: err }));
      });
      tlsSocket.once('secureConnect', () => {
        tlsSocket.removeAllListeners('error');
        resolve(tlsSocket);
      });
    });
  }

  async function dialViaProxy(target: DialTarget, timeoutMs: number): Promise<Socket> {
    const authority = formatAuthority(target.host, target.port);
    let socket: Socket | undefined;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        socket?.destroy();
        reject(new UpstreamProxyError('UPSTREAM_PROXY_TIMEOUT', `CONNECT ${authority} through the upstream proxy took more than ${timeoutMs} ms`));
      }, timeoutMs);
    });
    const handshake = (async (): Promise<Socket> => {
      socket = await openProxy(timeoutMs);
      if (endpoint.tls) socket = await secure(socket);
      const auth = authorization === undefined ? '' : `Proxy-Authorization: ${authorization}\r\n`;
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`);
      return readReply(socket, authority);
    })();
    try {
      const tunnel = await Promise.race([handshake, expired]);
      rememberTunnelTarget(tunnel, target);
      return tunnel;
    } catch (err) {
      socket?.destroy();
      // A late handshake after the timer fired: its socket is closed, never handed out.
      handshake.then((late) => late.destroy(), () => undefined);
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  const dial = ((target: DialTarget, timeoutMs: number) => (target.viaProxy === true ? dialViaProxy(target, timeoutMs) : direct(target, timeoutMs))) as DialFunction;
  return Object.assign(dial, { attempts, budget: { ms: UPSTREAM_PROXY_DIAL_BUDGET_MS, now: deps.now } });
}

/** The proxy's answer so far: more bytes needed, a failure, or a 200 with the bytes that followed its head. */
export function parseProxyReply(buffered: Buffer, authority: string): 'incomplete' | UpstreamProxyError | { readonly rest: Buffer } {
  const malformed = (why: string): UpstreamProxyError => new UpstreamProxyError('UPSTREAM_PROXY_MALFORMED', `CONNECT ${authority}: the upstream proxy ${why}`);
  const end = buffered.indexOf(HEAD_END);
  if (end < 0 ? buffered.length > PROXY_REPLY_HEAD_MAX_BYTES : end + HEAD_END.length > PROXY_REPLY_HEAD_MAX_BYTES) {
    return malformed(`sent an answer head longer than ${PROXY_REPLY_HEAD_MAX_BYTES} bytes`);
  }
  if (end < 0) return 'incomplete';
  const status = STATUS_LINE.exec(buffered.subarray(0, buffered.indexOf('\r\n')).toString('latin1'));
  if (status === null) return malformed('answered something that is not an HTTP/1.x status line');
  const code = Number(status[1]);
  if (code !== 200) return new UpstreamProxyError('UPSTREAM_PROXY_REFUSED', `CONNECT ${authority}: the upstream proxy answered ${code}`, { proxyStatus: code });
  return { rest: buffered.subarray(end + HEAD_END.length) };
}

/**
 * Reads the proxy's answer head in paused mode ('readable', never 'data'), so the socket is handed on as a fresh one
 * is: not flowing, with any bytes after the head put back for the tunnel's first reader.
 */
function readReply(socket: Socket, authority: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    let buffered: Buffer = Buffer.alloc(0);
    const finish = (outcome: UpstreamProxyError | { readonly rest: Buffer }): void => {
      socket.removeListener('readable', onReadable);
      socket.removeListener('end', onEnd);
      socket.removeListener('error', onError);
      if (outcome instanceof UpstreamProxyError) {
        socket.destroy();
        reject(outcome);
        return;
      }
      // The origin may speak first (SSH, SMTP): bytes that came with the head belong to the tunnel.
      if (outcome.rest.length > 0) socket.unshift(outcome.rest);
      resolve(socket);
    };
    function onReadable(): void {
      let chunk = socket.read() as Buffer | null;
      while (chunk !== null) {
        buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
        const outcome = parseProxyReply(buffered, authority);
        if (outcome !== 'incomplete') {
          finish(outcome);
          return;
        }
        chunk = socket.read() as Buffer | null;
      }
    }
    function onEnd(): void {
      finish(new UpstreamProxyError('UPSTREAM_PROXY_MALFORMED', `CONNECT ${authority}: the upstream proxy closed before its answer ended`));
    }
    function onError(err: Error): void {
      finish(new UpstreamProxyError('UPSTREAM_PROXY_UNREACHABLE', `CONNECT ${authority}: ${err.message}`, { cause: err }));
    }
    socket.on('readable', onReadable);
    socket.once('end', onEnd);
    socket.once('error', onError);
  });
}
