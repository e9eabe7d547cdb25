// Redacts echoed secrets from response text (CR-23 pin): the raw value (so `Bearer x` too), its percent-
// and base64-encoded forms, and `Basic base64(user:x)` tokens. A second line of defence; pure.

import { REDACTED } from './secret.js';
import type { CredentialScope } from './scope.js';
import { encodeUnreserved } from './substitute.js';

const BASIC_TOKEN = /(Basic\s+)([A-Za-z0-9+/]+={0,2})/gi;

function formsOf(value: string): string[] {
  const forms = new Set<string>([value]);
  try {
    forms.add(encodeUnreserved(value));
    forms.add(encodeURIComponent(value));
  } catch {
    // A lone surrogate cannot be percent-encoded; the raw form is still redacted.
  }
  const b64 = Buffer.from(value, 'utf8').toString('base64');
  forms.add(b64);
  forms.add(b64.replace(/=+$/, ''));
  forms.add(Buffer.from(value, 'utf8').toString('base64url'));
  return [...forms].filter((form) => form.length > 0);
}

/** `text` with every secret of `scope` replaced by `[redacted]`, in raw, Bearer, Basic and encoded forms. */
export function redactSecrets(text: string, scope: CredentialScope): string {
  const values = scope.secrets().map((secret) => secret.reveal());
  if (values.length === 0) return text;
  let out = text.replace(BASIC_TOKEN, (whole, prefix: string, token: string) => {
    const decoded = Buffer.from(token, 'base64').toString('utf8');
    return values.some((value) => decoded.includes(value)) ? `${prefix}${REDACTED}` : whole;
  });
  const forms = [...new Set(values.flatMap(formsOf))].sort((a, b) => b.length - a.length);
  for (const form of forms) out = out.split(form).join(REDACTED);
  return out;
}
