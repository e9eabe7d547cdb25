// Reads the SNI out of a TLS ClientHello (RFC 8446 §4.1.2, RFC 6066 §3), across handshake records.
// Pure and bounded: bytes in, a verdict out; never decides whether the name is allowed.

/** A ClientHello larger than this (records included) is not waited for: it cannot be checked. */
export const MAX_CLIENT_HELLO_BYTES = 16_384;

const RECORD_HEADER_BYTES = 5;
const CONTENT_HANDSHAKE = 0x16;
const HANDSHAKE_CLIENT_HELLO = 0x01;
const EXTENSION_SERVER_NAME = 0x0000;
const NAME_TYPE_HOST = 0x00;

type ClientHelloRead =
  /** A prefix of a ClientHello: read more (up to MAX_CLIENT_HELLO_BYTES). */
  | { readonly kind: 'more' }
  | { readonly kind: 'not-tls' }
  | { readonly kind: 'malformed'; readonly why: string }
  /** `sni` lower case without a trailing dot; undefined when the client sent none. */
  | { readonly kind: 'hello'; readonly sni: string | undefined };

const MORE: ClientHelloRead = { kind: 'more' };

export function readClientHello(bytes: Buffer): ClientHelloRead {
  if (bytes.length === 0) return MORE;
  if (bytes[0] !== CONTENT_HANDSHAKE) return { kind: 'not-tls' };
  if (bytes.length >= 2 && bytes[1] !== 0x03) return { kind: 'not-tls' };
  // Handshake messages may be fragmented over several records: join their payloads first.
  const fragments: Buffer[] = [];
  let joined = 0;
  let offset = 0;
  let handshakeLength: number | undefined;
  while (handshakeLength === undefined || joined < 4 + handshakeLength) {
    if (bytes.length < offset + RECORD_HEADER_BYTES) return MORE;
    if (bytes[offset] !== CONTENT_HANDSHAKE) return { kind: 'malformed', why: 'handshake interrupted by another record type' };
    const length = bytes.readUInt16BE(offset + 3);
    if (length === 0) return { kind: 'malformed', why: 'empty handshake record' };
    if (bytes.length < offset + RECORD_HEADER_BYTES + length) return MORE;
    fragments.push(bytes.subarray(offset + RECORD_HEADER_BYTES, offset + RECORD_HEADER_BYTES + length));
    joined += length;
    offset += RECORD_HEADER_BYTES + length;
    if (handshakeLength === undefined && joined >= 4) {
      const head = Buffer.concat(fragments);
      if (head[0] !== HANDSHAKE_CLIENT_HELLO) return { kind: 'malformed', why: 'first handshake message is not a ClientHello' };
      handshakeLength = head.readUIntBE(1, 3);
      if (handshakeLength > MAX_CLIENT_HELLO_BYTES) return { kind: 'malformed', why: 'ClientHello is larger than we inspect' };
    }
  }
  return parseHello(Buffer.concat(fragments).subarray(4, 4 + handshakeLength));
}

function parseHello(body: Buffer): ClientHelloRead {
  const bad = (why: string): ClientHelloRead => ({ kind: 'malformed', why });
  // legacy_version (2) + random (32)
  let at = 34;
  const skip = (lengthBytes: 1 | 2): boolean => {
    if (body.length < at + lengthBytes) return false;
    const n = lengthBytes === 1 ? (body[at] ?? 0) : body.readUInt16BE(at);
    at += lengthBytes + n;
    return body.length >= at;
  };
  if (!skip(1) || !skip(2) || !skip(1)) return bad('truncated ClientHello');
  if (at === body.length) return { kind: 'hello', sni: undefined };
  if (body.length < at + 2) return bad('truncated extensions');
  const end = at + 2 + body.readUInt16BE(at);
  if (end > body.length) return bad('extensions run past the ClientHello');
  at += 2;
  while (at + 4 <= end) {
    const type = body.readUInt16BE(at);
    const length = body.readUInt16BE(at + 2);
    const data = body.subarray(at + 4, at + 4 + length);
    at += 4 + length;
    if (at > end) return bad('extension runs past the extensions block');
    if (type !== EXTENSION_SERVER_NAME) continue;
    return serverName(data);
  }
  return { kind: 'hello', sni: undefined };
}

function serverName(data: Buffer): ClientHelloRead {
  if (data.length < 2 || data.readUInt16BE(0) !== data.length - 2) return { kind: 'malformed', why: 'bad server_name list' };
  let at = 2;
  while (at + 3 <= data.length) {
    const type = data[at];
    const length = data.readUInt16BE(at + 1);
    if (at + 3 + length > data.length) return { kind: 'malformed', why: 'server_name runs past its list' };
    if (type === NAME_TYPE_HOST) {
      const lower = data.toString('latin1', at + 3, at + 3 + length).toLowerCase();
      return { kind: 'hello', sni: lower.endsWith('.') ? lower.slice(0, -1) : lower };
    }
    at += 3 + length;
  }
  return { kind: 'hello', sni: undefined };
}
