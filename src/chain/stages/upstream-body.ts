// Stage `upstream-body`: the body that goes upstream, held before the head leaves where a credential or a signature
// needs it (docs/credentials.md#streaming-bodies): signed (the endpoint's SigV4 keys, after every header change),
// rewritten (request_body_credential_rewrite), or checked whole for a placeholder up to MAX_BODY_CHECK_BYTES. Elsewhere
// it streams through the placeholder scanner, which stops it before a placeholder's bytes are released.

import type { CredentialSource } from '../../credentials/source.js';
import { checkedBody, routeHasCredentials, scannedBody, type BodyResult } from '../credential-injection.js';
import { scannedMessages } from '../h2-body.js';
import { rewrittenBody } from '../credential-injection.js';
import { type SignedResult, signedRequest } from '../sigv4-request.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, type Refusal, type Stage } from '../stage.js';
import { credentialRefusal } from './credentials.js';

function held(r: ChainRequest, result: BodyResult | SignedResult): Refusal | undefined {
  if (!result.ok) return credentialRefusal(r, result);
  // OpenShell's "SigV4 re-signed" event, as fields of the request's one decision event (no key, no signature).
  if ('signed' in result) r.sigv4 = result.signed;
  r.upstreamHeaders = result.headers;
  r.upstreamBody = result.body;
  return CONTINUE;
}

export function createUpstreamBodyStage(deps: { readonly credentials: CredentialSource }): Stage<ChainRequest> {
  const { credentials } = deps;
  return {
    name: 'upstream-body',
    run(r) {
      const head = r.head!;
      const host = r.host as string;
      const port = r.port as number;
      const decision = r.decision!;
      const wire = r.wire as ChainRequest['wire'] & AsyncIterable<Buffer>;
      const { tls } = r.destination!;
      // What the protocol owes before the body is read: HTTP/1.1's 100 Continue, HTTP/2's trailers.
      const hasBody = r.hooks.goingUpstream();
      const endpoint = decision.endpoint;
      if (endpoint?.credentialSigning !== undefined) {
        return signedRequest({ req: wire, body: r.body, head, endpoint, host, port, tls, method: r.method, hasBody }).then((s) => held(r, s));
      }
      if (!hasBody) {
        r.upstreamBody = null;
        return CONTINUE;
      }
      // gRPC and Connect streaming: messages are released one by one, never held (a streaming call would wait forever).
      const streamed = r.streamed;
      if (endpoint?.requestBodyCredentialRewrite === true) return rewrittenBody(r.body, head).then((b) => held(r, b));
      // A held inspected body goes as the bytes read, with a Content-Length (a chunked one is re-framed).
      if (r.hold !== undefined || (!streamed && routeHasCredentials(credentials, decision, host, port))) return checkedBody(r.body, head).then((b) => held(r, b));
      r.upstreamBody = streamed ? scannedMessages(r.body) : scannedBody(r.body);
      return CONTINUE;
    },
  };
}
