// Client-to-server WebSocket text frames after an allowed 101 (docs/credentials.md#substitution-slots, CR-18): rewritten only
// when the endpoint sets websocket_credential_rewrite, scanned otherwise. The proxy closes with 1008 on
// a refusal and never rewrites binary frames (on a credentialed upgrade they are refused outright).

import { type RewriteRefusal, refuse } from './outcome.js';
import { containsMarker } from './placeholder.js';
import type { CredentialScope } from './scope.js';
import { createSubstituter } from './substitute.js';

interface WebSocketTextRequest {
  /** One complete (reassembled) text message. */
  readonly text: string;
  readonly scope: CredentialScope;
  /** The endpoint's websocket_credential_rewrite. */
  readonly rewrite: boolean;
}

type WebSocketTextRewrite =
  | { readonly ok: true; readonly text: string; readonly usedKeys: readonly string[] }
  | RewriteRefusal;

export function rewriteWebSocketText(request: WebSocketTextRequest): WebSocketTextRewrite {
  const { text, scope } = request;
  if (!containsMarker(text)) return { ok: true, text, usedKeys: [] };
  const sub = createSubstituter(scope);
  if (!request.rewrite) {
    sub.classify(text);
    return sub.refusal() ?? refuse('leftover-marker', 'credential placeholders are not rewritten on this WebSocket');
  }
  const next = sub.apply(text, (value) => value);
  const refusal = sub.refusal();
  if (refusal !== undefined) return refusal;
  if (containsMarker(next)) {
    return refuse(scope.hasResolver ? 'leftover-marker' : 'no-authority', 'a credential placeholder could not be resolved');
  }
  if (sub.used.size > 0 && !scope.stillCurrent()) {
    return refuse('stale-revision', 'the credentials changed during the WebSocket session; reconnect');
  }
  return { ok: true, text: next, usedKeys: [...sub.used].sort() };
}
