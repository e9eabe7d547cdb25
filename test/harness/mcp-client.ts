// The MCP SDK's own client (Client + StreamableHTTPClientTransport) sent through boundary: as a forward proxy
// (undici's ProxyAgent; CONNECT with TLS interception for https URLs), or straight at a captured address.

import type { LookupOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Agent, type Dispatcher, fetch as undiciFetch, ProxyAgent } from 'undici';

export interface McpClient {
  readonly client: Client;
  readonly transport: StreamableHTTPClientTransport;
  /** Errors the client reported outside a request (a failed stream, an unknown id). */
  readonly errors: Error[];
  close(): Promise<void>;
}

export interface McpClientOptions {
  /** The boundary's proxy port; omitted: the URL is dialled directly (transparent capture). */
  readonly proxyPort?: number;
  /** PEM the client trusts for https URLs (the boundary's interception CA). */
  readonly caPem?: string;
  /** Capabilities the client declares (elicitation, roots, ...). */
  readonly capabilities?: ConstructorParameters<typeof Client>[1];
  /** Connect (initialize + notifications/initialized) before returning; default true. */
  readonly connect?: boolean;
  /** Accept every form elicitation with empty content (the SDK fills in the schema's defaults when asked to). */
  readonly acceptElicitation?: boolean;
  /** Headers sent on every request (a credential placeholder). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Dial this address for every name (a synthetic address, for transparent capture), keeping the URL's host. */
  readonly address?: string;
  /** Offer ALPN h2 on https URLs (undici's allowH2), so an intercepted tunnel speaks HTTP/2. */
  readonly h2?: boolean;
}

/** A `lookup` for net/tls connect that answers every name with `address` (both callback shapes Node uses). */
export function fixedLookup(address: string): LookupFunction {
  return ((_host: string, opts: LookupOptions, cb: (...args: unknown[]) => void): void => {
    if (opts.all === true) cb(null, [{ address, family: 4 }]);
    else cb(null, address, 4);
  }) as LookupFunction;
}

export async function mcpClient(url: string, options: McpClientOptions = {}): Promise<McpClient> {
  const h2 = options.h2 === true ? { allowH2: true } : {};
  const tls = {
    ...(options.caPem === undefined ? {} : { ca: options.caPem }),
    ...(options.address === undefined ? {} : { lookup: fixedLookup(options.address) }),
    // ProxyAgent builds its tunnel's TLS from requestTls: ALPN h2 is offered only when it says so too.
    ...h2,
  };
  const dispatcher: Dispatcher = options.proxyPort === undefined
    ? new Agent({ connect: tls, ...h2 })
    : new ProxyAgent({ uri: `http://127.0.0.1:${options.proxyPort}`, requestTls: tls, ...h2 });
  const fetch = ((input: string | URL, init?: RequestInit) => undiciFetch(input, { ...(init as object), dispatcher })) as unknown as typeof globalThis.fetch;
  const requestInit = options.headers === undefined ? {} : { requestInit: { headers: { ...options.headers } } };
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch, ...requestInit });
  const client = new Client({ name: 'boundary-test-client', version: '1.0.0' }, options.capabilities);
  const errors: Error[] = [];
  client.onerror = (err) => errors.push(err);
  if (options.acceptElicitation === true) client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: {} }));
  if (options.connect !== false) await client.connect(transport);
  return {
    client,
    transport,
    errors,
    async close() {
      await client.close().catch(() => undefined);
      await dispatcher.close();
    },
  };
}
