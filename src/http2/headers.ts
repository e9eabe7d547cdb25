// Header lists between HTTP/2 and the proxy's flat `[name, value, ...]` form: an upstream HTTP/2 request head built
// from the rewritten flat list, a response head or trailers for an HTTP/2 client, cookies joined for HTTP/1.1.
// Pure; never sees a socket, and passes values through unread (they may carry injected credentials).

import { BAD_TARGET } from '../http1/grammar.js';
import { checkField, checkMethodAndTarget, invalid } from '../http1/h1-request.js';
import { CONNECTION_SPECIFIC_HEADERS } from './request-head.js';

/** Response fields that never cross into HTTP/2 (RFC 9113 §8.2.2), beside whatever `connection` nominated. */
const RESPONSE_DROP: readonly string[] = [...CONNECTION_SPECIFIC_HEADERS, 'te', 'trailer'];

/** How far past its last match a field is looked for among the checked ones: fields dropped on the way up in a row. */
const CHECKED_LOOKAHEAD_FIELDS = 4;
const NONE_CHECKED: readonly string[] = [];

/**
 * The head of an upstream HTTP/2 request, flat for the HPACK encoder: the pseudo-headers, then the flat list as
 * rewritten for upstream, its `host` turned into `:authority`, names lower-cased. `te: trailers` goes on when the
 * client sent it (gRPC servers insist on it); the HTTP/1.1 rewrite drops every `te`. Throws UPSTREAM_REQUEST_INVALID
 * before anything is encoded when a name is not a token or a value (or the method, path or authority) has a
 * character HTTP forbids: values carry injected credentials, the encoder writes bytes as given, and no message quotes
 * a value. `checked`: fields already held to request-head.ts's stricter rules (the client's head as read); a field
 * equal to one of them, name and value, passes without being checked again. Every other field is checked.
 */
export function h2RequestFields(
  flat: readonly string[],
  pseudo: { readonly method: string; readonly path: string; readonly scheme: string; readonly teTrailers: boolean },
  checked: readonly string[] = NONE_CHECKED,
): string[] {
  checkMethodAndTarget(pseudo.method, pseudo.path);
  // Sized for the pseudo-headers, `te` and every field but one host (the usual list, which then neither grows nor
  // needs trimming); other lists grow or are trimmed at the end.
  const out: string[] = new Array<string>(flat.length + (pseudo.teTrailers ? 8 : 6));
  out[0] = ':method';
  out[1] = pseudo.method;
  out[2] = ':scheme';
  out[3] = pseudo.scheme;
  out[4] = ':authority';
  out[5] = '';
  out[6] = ':path';
  out[7] = pseudo.path;
  let n = 8;
  let authority = false;
  let next = 0;
  for (let i = 0; i < flat.length; i += 2) {
    const name = (flat[i] ?? '').toLowerCase();
    const value = flat[i + 1] ?? '';
    // The checked fields come in the same order, some dropped on the way up: the next one of this name is looked for.
    let at = next;
    const end = Math.min(checked.length, next + 2 * CHECKED_LOOKAHEAD_FIELDS);
    while (at < end && checked[at] !== name) at += 2;
    if (at < end) next = at + 2;
    if (at >= end || checked[at + 1] !== value) checkField('request header', i / 2, name, value);
    if (name === 'host') {
      if (BAD_TARGET.test(value)) throw invalid('request authority has a space or control character');
      if (!authority) out[5] = value;
      authority = true;
    } else if (!RESPONSE_DROP.includes(name)) {
      out[n++] = name;
      out[n++] = value;
    }
  }
  if (pseudo.teTrailers) {
    out[n++] = 'te';
    out[n++] = 'trailers';
  }
  if (out.length !== n) out.length = n;
  if (!authority) out.splice(4, 2);
  return out;
}

/** Request trailers for the HPACK encoder: names lower-cased, checked as h2RequestFields checks fields (throws). */
export function h2TrailerFields(flat: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    const name = (flat[i] ?? '').toLowerCase();
    const value = flat[i + 1] ?? '';
    checkField('request trailer', i / 2, name, value);
    if (!RESPONSE_DROP.includes(name)) out.push(name, value);
  }
  return out;
}

/**
 * A response head (`:status` first) or trailers (status undefined) for an HTTP/2 client, flat for the HPACK encoder:
 * names lower-cased, connection-specific fields dropped. Values pass as they are: they were checked where they were
 * read (an HTTP/1.1 parser or response-head.ts), and the credential redaction only shortens them.
 */
export function h2ResponseFields(status: number | undefined, flat: readonly string[]): string[] {
  const out: string[] = status === undefined ? [] : [':status', String(status)];
  for (let i = 0; i < flat.length; i += 2) {
    const name = (flat[i] ?? '').toLowerCase();
    if (name.charCodeAt(0) === 58 || RESPONSE_DROP.includes(name)) continue;
    out.push(name, flat[i + 1] ?? '');
  }
  return out;
}

/**
 * h2ResponseFields without `:status` (it goes out on its own, RequestStream.respondHead): the list itself when it
 * needs no change, as an HTTP/2 origin's fields read by response-head.ts do not, else the changed copy.
 */
export function h2ResponseRegular(flat: readonly string[]): readonly string[] {
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i] ?? '';
    if (name.charCodeAt(0) === 58 || name.toLowerCase() !== name || RESPONSE_DROP.includes(name) || flat[i + 1] === undefined) return h2ResponseFields(undefined, flat);
  }
  return flat;
}

/** A raw header list without its pseudo-headers (`:status`), as the flat form the proxy rewrites. */
export function withoutPseudo(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] ?? '';
    if (name.charCodeAt(0) !== 58) out.push(name, raw[i + 1] ?? '');
  }
  return out;
}

/** RFC 9113 §8.2.3: HTTP/2 may split `cookie` into several fields; HTTP/1.1 gets them joined with `; `. */
export function joinedCookies(flat: readonly string[]): readonly string[] {
  let first = -1;
  let repeated = false;
  for (let i = 0; i < flat.length; i += 2) {
    if (flat[i] !== 'cookie') continue;
    if (first >= 0) repeated = true;
    else first = i;
  }
  if (!repeated) return flat;
  const out: string[] = [];
  const values: string[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    if (flat[i] === 'cookie') values.push(flat[i + 1] ?? '');
    if (flat[i] === 'cookie' && i !== first) continue;
    out.push(flat[i] ?? '', flat[i + 1] ?? '');
  }
  out[first + 1] = values.join('; ');
  return out;
}
