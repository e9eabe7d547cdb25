// Stage `authority`: where the request goes. A forward request names it in absolute form (http only: https must use
// CONNECT); a request inside a tunnel names it in Host or absolute form, and it must be the tunnel's own target,
// else it is refused with a finding (a client cannot reach a second origin through one CONNECT).

import { formatAuthority } from '../../net/host.js';
import { parseAbsoluteTarget } from '../../http1/target.js';
import type { AuthorityParsers } from '../../proxy/context.js';
import { authorityMismatchDenial, unsupportedSchemeDenial, useConnectDenial } from '../denials.js';
import type { ChainRequest } from '../request.js';
import { CONTINUE, denied, refusal, type Refusal, type Stage } from '../stage.js';

export function createAuthorityStage(deps: { readonly authorities: AuthorityParsers }): Stage<ChainRequest> {
  const { authorities } = deps;
  function forward(r: ChainRequest): Refusal | undefined {
    const abs = parseAbsoluteTarget(r.wire.url);
    if (!abs.ok) return refusal('deny', 'bad-request', 'origin-form request sent to the proxy', 400);
    if (abs.scheme === 'https') return denied(useConnectDenial(), 'unsupported-scheme', 'https:// in absolute form; use CONNECT');
    if (abs.scheme !== 'http') return denied(unsupportedSchemeDenial(abs.scheme), 'unsupported-scheme', `scheme ${abs.scheme} is not supported`);
    const auth = authorities.http(abs.authority);
    if (!auth.ok) return refusal('deny', 'bad-request', `bad authority: ${auth.message}`, 400);
    r.host = auth.host;
    r.port = auth.port;
    r.hostForm = auth.kind;
    r.target = abs.target;
    return CONTINUE;
  }
  function inTunnel(r: ChainRequest, tunnel: NonNullable<ChainRequest['tunnel']>): Refusal | undefined {
    const url = r.wire.url;
    let authorityText = r.framing?.host;
    let target = url;
    if (url.charCodeAt(0) !== 47) {
      const abs = parseAbsoluteTarget(url);
      if (!abs.ok || (abs.scheme !== 'http' && abs.scheme !== 'https')) {
        return refusal('deny', 'bad-request', 'request target is neither origin- nor absolute-form', 400);
      }
      authorityText = abs.authority;
      target = abs.target;
    }
    const auth = authorityText === undefined ? undefined : (tunnel.tls ? authorities.https : authorities.http)(authorityText);
    if (auth === undefined || !auth.ok) return refusal('deny', 'bad-request', 'request has no valid authority', 400);
    if (tunnel.tls) r.scheme = 'https';
    if (auth.host !== tunnel.host || auth.port !== tunnel.port) {
      const expected = formatAuthority(tunnel.host, tunnel.port);
      r.host = tunnel.host;
      r.port = tunnel.port;
      const detail = `request authority ${formatAuthority(auth.host, auth.port)} differs from tunnel target ${expected}`;
      return denied(authorityMismatchDenial(expected), 'authority-mismatch', detail, 'authority-mismatch');
    }
    r.host = auth.host;
    r.port = auth.port;
    r.hostForm = auth.kind;
    r.target = target;
    return CONTINUE;
  }
  return {
    name: 'authority',
    run: (r) => (r.tunnel === undefined ? forward(r) : inTunnel(r, r.tunnel)),
  };
}
