// Stage `credentials`: the head that goes upstream (docs/credentials.md): hop-by-hop and proxy fields dropped, the Host
// written for the destination, placeholders swapped for the real secrets the endpoint is bound to, or the request
// refused when one cannot be (never a placeholder upstream). A signing endpoint's own (placeholder-key) signature goes
// first. A WebSocket handshake loses its extension offer where its frames will be read.

import type { RewriteRefusal } from '../../credentials/outcome.js';
import type { PlaceholderFamily } from '../../credentials/placeholder.js';
import type { CredentialSource } from '../../credentials/source.js';
import { hostHeader, upstreamRequestHeaders } from '../../http1/headers.js';
import { credentialDenial } from '../denials.js';
import { credentialHead, credentialRefusalFacts } from '../credential-injection.js';
import { withoutAwsAuth } from '../sigv4-request.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, type Refusal, type Stage } from '../stage.js';

/** A credential refusal as the chain ends with it: closed reason, the module's log message, never a key name. */
export function credentialRefusal(r: ChainRequest, refused: RewriteRefusal): Refusal {
  const { reason, finding } = credentialRefusalFacts(refused);
  r.credentialReason = refused.reason;
  // A binding mismatch is a HIGH event plus a finding: a placeholder was sent where its secret must never go.
  if (finding !== undefined) r.severity = 'HIGH';
  return { verdict: 'deny', reason, detail: refused.logMessage, status: refused.status, denial: credentialDenial(refused), finding };
}

/** Drops the extension offer: permessage-deflate would hide text frames from inspection. */
function withoutExtensions(flat: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    if ((flat[i] ?? '').toLowerCase() === 'sec-websocket-extensions') continue;
    out.push(flat[i] ?? '', flat[i + 1] ?? '');
  }
  return out;
}

export function createCredentialsStage(deps: {
  readonly credentials: CredentialSource;
  readonly placeholderFamily?: PlaceholderFamily | undefined;
}): Stage<ChainRequest> {
  const { credentials, placeholderFamily } = deps;
  // The last Host value made, for the next request to the same authority (most are): one string, flattened once
  // when it is first written, instead of one made per request.
  let memoHost = '';
  let memoPort = -1;
  let memoTls = false;
  let memoValue = '';
  const hostValue = (host: string, port: number, tls: boolean): string => {
    if (host !== memoHost || port !== memoPort || tls !== memoTls) {
      memoValue = hostHeader(host, port, tls);
      memoHost = host;
      memoPort = port;
      memoTls = tls;
    }
    return memoValue;
  };
  return {
    name: 'credentials',
    run(r) {
      const host = r.host as string;
      const port = r.port as number;
      const { tls } = r.destination!;
      const endpoint = r.decision?.endpoint;
      const websocket = r.framing?.upgrade === 'websocket';
      // The head as network middlewares left it (their header changes, a replaced body's Content-Length).
      const authority = hostValue(host, port, tls);
      const fields = upstreamRequestHeaders(r.requestHeaders ?? r.wire.rawHeaders, websocket ? { host: authority, upgrade: 'websocket' } : { host: authority, httpVersion: r.wire.httpVersion });
      const signing = endpoint?.credentialSigning === undefined ? undefined : endpoint;
      const headers = signing === undefined ? fields : withoutAwsAuth(fields);
      const prepared = credentialHead({ source: credentials, family: placeholderFamily, host, port, method: r.method, target: r.target, headers, endpoint });
      if (!prepared.ok) return credentialRefusal(r, prepared);
      const head = prepared.head;
      // docs/credentials.md#inspectable-routes-only: a route that binds credentials reads its frames even on an L4 endpoint,
      // and so does one whose network middlewares read text messages.
      r.websocketInspected = websocket && (endpoint?.protocol === 'websocket' || head.scope.boundKeys.length > 0 || r.websocketMiddlewares !== undefined);
      r.head = r.websocketInspected ? { ...head, headers: withoutExtensions(head.headers) } : head;
      r.upstreamHeaders = r.head.headers;
      return CONTINUE;
    },
  };
}
