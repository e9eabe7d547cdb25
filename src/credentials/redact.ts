// Redacts echoed secrets from response text (CR-23 pin): the raw value (so `Bearer x` too), its percent-, JSON- and
// base64-encoded forms, and `Basic base64(user:x)` tokens. Also lists those forms for the body redactor
// (body-redact.ts). A second line of defence; pure.

import { REDACTED } from './secret.js';
import type { CredentialScope } from './scope.js';
import { encodeUnreserved } from './substitute.js';

const BASIC_TOKEN = /(Basic\s+)([A-Za-z0-9+/]+={0,2})/gi;
/** Characters HTML-safe JSON encoders (Go's encoding/json) write as \u escapes, besides every non-ASCII one. */
const JSON_ASCII_ESCAPED = /[^\u0020-\u007e]|[<>&]/g;

/** The percent-encodings an origin may echo: boundary's own, encodeURIComponent's, form encoding's, either hex case. */
function percentForms(value: string): string[] {
  try {
    const strict = encodeUnreserved(value);
    const component = encodeURIComponent(value);
    const forms = [strict, component, component.replace(/%20/g, '+')];
    return [...forms, ...forms.map((form) => form.replace(/%[0-9A-F]{2}/g, (hex) => hex.toLowerCase()))];
  } catch {
    // A lone surrogate cannot be percent-encoded; the raw form is still redacted.
    return [];
  }
}

/** The inside of a JSON string holding the value: as JSON.stringify writes it, with `\/`, and ASCII-only in either hex case. */
function jsonForms(value: string): string[] {
  const plain = JSON.stringify(value).slice(1, -1);
  const ascii = (upper: boolean) =>
    plain.replace(JSON_ASCII_ESCAPED, (c) => {
      const hex = c.charCodeAt(0).toString(16).padStart(4, '0');
      return `\\u${upper ? hex.toUpperCase() : hex}`;
    });
  return [plain, plain.replace(/\//g, '\\/'), ascii(false), ascii(true)];
}

/** Every whole form of `value` an origin may echo it in, longest first, without duplicates or empty ones. */
export function secretForms(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const b64 = bytes.toString('base64');
  const forms = new Set<string>([value, ...percentForms(value), ...jsonForms(value), b64, b64.replace(/=+$/, ''), bytes.toString('base64url')]);
  return [...forms].filter((form) => form.length > 0).sort((a, b) => b.length - a.length);
}

/** `text` with every secret of `scope` replaced by `[redacted]`, in raw, Bearer, Basic and encoded forms. */
export function redactSecrets(text: string, scope: CredentialScope): string {
  const values = scope.secrets().map((secret) => secret.reveal());
  if (values.length === 0) return text;
  let out = text.replace(BASIC_TOKEN, (whole, prefix: string, token: string) => {
    const decoded = Buffer.from(token, 'base64').toString('utf8');
    return values.some((value) => decoded.includes(value)) ? `${prefix}${REDACTED}` : whole;
  });
  const forms = [...new Set(values.flatMap(secretForms))].sort((a, b) => b.length - a.length);
  for (const form of forms) out = out.split(form).join(REDACTED);
  return out;
}
