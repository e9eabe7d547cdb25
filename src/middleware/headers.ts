// The request head after a middleware replaced the body: the new length is the only framing that goes upstream.
// Pure.

/** `flat` (`[name, value, ...]`) without any `lower` field. */
export function withoutHeader(flat: readonly string[], lower: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    if ((flat[i] ?? '').toLowerCase() === lower) continue;
    out.push(flat[i] ?? '', flat[i + 1] ?? '');
  }
  return out;
}

/** `flat` (`[name, value, ...]`) with its Content-Length set to `length`; Transfer-Encoding never goes upstream as sent. */
export function withContentLength(flat: readonly string[], length: number): string[] {
  const out = withoutHeader(withoutHeader(flat, 'content-length'), 'transfer-encoding');
  out.push('content-length', String(length));
  return out;
}
