// The corporate upstream proxy's part of the composition root: reads its auth file and CA at start and wraps the
// upstream dial in the proxy's (chain/upstream-proxy-dial.ts). Without --upstream-proxy the dial is left as it was.

import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { UpstreamProxyConfig } from './config.js';
import type { DialFunction } from '../chain/dial.js';
import { createUpstreamProxyDial } from '../chain/upstream-proxy-dial.js';
import { MAX_PROXY_AUTH_FILE_BYTES, parseProxyAuth } from '../net/upstream-proxy.js';
import type { Resolver } from '../net/resolver.js';
import { formatAuthority } from '../net/host.js';
import type { Logger } from '../telemetry/logger.js';
import { BoundaryError } from '../shared/errors.js';
import { GLOBAL_TIMERS } from '../shared/timers.js';

export async function openUpstreamProxy(
  config: UpstreamProxyConfig | undefined,
  deps: { readonly dial: DialFunction | undefined; readonly resolver: Resolver; readonly logger?: Logger },
): Promise<DialFunction | undefined> {
  if (config === undefined) return deps.dial;
  const { endpoint } = config;
  const proxy = `${endpoint.tls ? 'https' : 'http'}://${formatAuthority(endpoint.host, endpoint.port)}`;
  deps.logger?.info({ upstreamProxy: proxy, bypassEntries: config.bypass.entries.length, auth: config.authFile !== undefined }, 'upstream connections go through the upstream proxy');
  if (config.connectByName) deps.logger?.warn({ upstreamProxy: proxy }, '--upstream-proxy-connect-by-name: the proxy resolves names itself; the address it reaches is not pinned by boundary');
  let authorization: string | undefined;
  if (config.authFile !== undefined) {
    const text = await readConfigFile(config.authFile, '--upstream-proxy-auth-file');
    if (Buffer.byteLength(text) > MAX_PROXY_AUTH_FILE_BYTES) throw new BoundaryError('CONFIG_INVALID', `--upstream-proxy-auth-file ${config.authFile} is longer than ${MAX_PROXY_AUTH_FILE_BYTES} bytes`);
    const auth = parseProxyAuth(text);
    if (!auth.ok) throw new BoundaryError('CONFIG_INVALID', `--upstream-proxy-auth-file ${config.authFile}: ${auth.message}`);
    authorization = auth.value;
  }
  let caPem: string | undefined;
  if (config.caFile !== undefined) {
    caPem = await readConfigFile(config.caFile, '--upstream-proxy-ca');
    try {
      new X509Certificate(caPem);
    } catch (err) {
      throw new BoundaryError('CONFIG_INVALID', `--upstream-proxy-ca ${config.caFile} holds no PEM certificate`, { cause: err });
    }
  }
  const { resolver } = deps;
  return createUpstreamProxyDial(
    { endpoint: config.endpoint, authorization, caPem, bypass: config.bypass, connectByName: config.connectByName },
    {
      direct: deps.dial,
      // The proxy's own name, from the operator, goes to the trusted resolver; destinations never come here.
      async resolveProxy(name) {
        for (const family of [4, 6] as const) {
          const answer = await resolver.resolve(name, family);
          if (answer.ok && answer.addresses.length > 0) return answer.addresses;
        }
        return [];
      },
      now: GLOBAL_TIMERS.now,
    },
  );
}

async function readConfigFile(path: string, flag: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new BoundaryError('CONFIG_INVALID', `cannot read ${flag} ${path}`, { cause: err });
  }
}
