// HPACK's static table (RFC 7541 Appendix A), read by the decoder (hpack.ts) and the encoder (hpack-encode.ts), and
// the latin1 fast paths of Buffer both use.

/** Appendix A, flattened [name, value, ...]; entry i (1-based) is at 2(i-1). */
const STATIC_FIELDS: readonly string[] = [
  ':authority', '', ':method', 'GET', ':method', 'POST', ':path', '/', ':path', '/index.html', ':scheme', 'http',
  ':scheme', 'https', ':status', '200', ':status', '204', ':status', '206', ':status', '304', ':status', '400',
  ':status', '404', ':status', '500', 'accept-charset', '', 'accept-encoding', 'gzip, deflate', 'accept-language', '',
  'accept-ranges', '', 'accept', '', 'access-control-allow-origin', '', 'age', '', 'allow', '', 'authorization', '',
  'cache-control', '', 'content-disposition', '', 'content-encoding', '', 'content-language', '', 'content-length', '',
  'content-location', '', 'content-range', '', 'content-type', '', 'cookie', '', 'date', '', 'etag', '', 'expect', '',
  'expires', '', 'from', '', 'host', '', 'if-match', '', 'if-modified-since', '', 'if-none-match', '', 'if-range', '',
  'if-unmodified-since', '', 'last-modified', '', 'link', '', 'location', '', 'max-forwards', '',
  'proxy-authenticate', '', 'proxy-authorization', '', 'range', '', 'referer', '', 'refresh', '', 'retry-after', '',
  'server', '', 'set-cookie', '', 'strict-transport-security', '', 'transfer-encoding', '', 'user-agent', '',
  'vary', '', 'via', '', 'www-authenticate', '',
];
export const STATIC_COUNT = STATIC_FIELDS.length / 2;
// Index 0 is a placeholder so that a wire index reads its entry directly.
export const STATIC_NAMES: readonly string[] = ['', ...STATIC_FIELDS.filter((_, i) => i % 2 === 0)];
export const STATIC_VALUES: readonly string[] = ['', ...STATIC_FIELDS.filter((_, i) => i % 2 === 1)];

// Buffer.prototype.latin1Slice/latin1Write are what toString('latin1')/write(s, o, 'latin1') end in after checking
// their arguments; @types/node leaves them out. The hot path calls them directly.
export interface Latin1Buffer extends Buffer {
  latin1Slice(start: number, end: number): string;
  latin1Write(text: string, offset: number, length: number): number;
}
