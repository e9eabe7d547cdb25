// Policy-side host normalisation and the wildcard grammar (docs/policy.md#host-patterns). Exact names and IP literals go through
// net/host.ts normaliseHost(), the request side, so a policy host is spelt exactly as the requests it must match.
// Pure; says what is wrong, never matches requests (that is match.ts).

import { domainToASCII } from 'node:url';
import type { ErrorCode } from '../shared/errors.js';
import { MAX_LABEL_CHARS, MAX_NAME_CHARS, normaliseHost } from '../net/host.js';

export { MAX_LABEL_CHARS, MAX_NAME_CHARS } from '../net/host.js';

/** Fixed wildcard suffixes that are public suffixes: `*.co.uk` would cover every registrant (warning only). */
const PUBLIC_SUFFIXES: ReadonlySet<string> = new Set([
  'co.uk', 'org.uk', 'ac.uk', 'gov.uk', 'me.uk', 'com.au', 'net.au', 'org.au', 'co.nz', 'co.jp', 'ne.jp',
  'or.jp', 'co.kr', 'com.br', 'com.cn', 'com.mx', 'com.tr', 'co.in', 'co.za', 'com.sg', 'com.hk',
  'github.io', 'gitlab.io', 'herokuapp.com', 'appspot.com', 'azurewebsites.net', 'cloudfront.net',
  'netlify.app', 'vercel.app', 'pages.dev', 'workers.dev', 'web.app', 'firebaseapp.com', 'blogspot.com',
  's3.amazonaws.com', 'fly.dev', 'onrender.com', 'ngrok.io', 'trycloudflare.com',
]);

type PolicyHost =
  | { readonly ok: true; readonly host: string; readonly kind: 'exact' | 'wildcard' | 'ip'; readonly warning?: string }
  | { readonly ok: false; readonly code: ErrorCode; readonly message: string };

const GLOB_CHARS = /[?[\]{},]/;
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$/;
const WILDCARD_FIRST_LABEL = /^[a-z0-9_*-]+$/;
// The four dots UTS 46 maps to `.`: `api.example.com。` ends in a dot just as `api.example.com.` does.
const TRAILING_DOT = /[.\u3002\uff0e\uff61]$/;

/** Normalises a policy `host`. `tcp` rejects a trailing dot and IP literals (V9). */
export function normalisePolicyHost(raw: string, options: { tcp?: boolean } = {}): PolicyHost {
  if (raw.length === 0) return fail('POLICY_HOST_INVALID', 'host is empty');
  if (/[\s%/@\\]/.test(raw) || /[\u0000-\u001f\u007f]/.test(raw)) {
    return fail('POLICY_HOST_INVALID', `host ${JSON.stringify(raw)} contains characters a hostname cannot hold`);
  }
  const bracketed = raw.startsWith('[') && raw.endsWith(']');
  if (!bracketed && GLOB_CHARS.test(raw)) {
    return fail('POLICY_HOST_WILDCARD', `host ${raw} uses glob syntax; hosts accept only * and ** wildcards`);
  }
  if (options.tcp === true && TRAILING_DOT.test(raw)) {
    return fail('POLICY_TCP_HOST', `protocol tcp needs a host without a trailing dot: ${raw}`);
  }
  if (raw.includes('*')) return wildcardHost(raw);
  // The request side's own function: IDNA on the text as written (lower-casing first maps some code points
  // differently: ẞ lower-cases to ß, whose A-label is xn--zca, while UTS 46 maps it to ss), WHATWG IPv4
  // (`10.1` is 10.0.0.1, `foo.123` is refused), one trailing dot off, canonical IPv6.
  const normal = normaliseHost(raw);
  if (!normal.ok) {
    const why = raw.includes(':') ? 'not a valid IPv6 literal (zone ids are not allowed)' : normal.message;
    return fail('POLICY_HOST_INVALID', `host ${raw}: ${why}`);
  }
  if (normal.kind !== 'name') {
    if (options.tcp === true) return fail('POLICY_TCP_HOST', `protocol tcp needs a DNS hostname, not the IP ${raw}`);
    return { ok: true, host: normal.host, kind: 'ip' };
  }
  const problem = nameProblem(normal.host.split('.'), normal.host);
  if (problem !== undefined) return fail('POLICY_HOST_INVALID', `host ${raw}: ${problem}`);
  return { ok: true, host: normal.host, kind: 'exact' };
}

/** The labels after the last wildcard label (`example.com` for `*.s3.*.example.com`). */
function fixedSuffix(pattern: string): string {
  const labels = pattern.split('.');
  let last = -1;
  labels.forEach((label, i) => {
    if (label.includes('*')) last = i;
  });
  return labels.slice(last + 1).join('.');
}

function wildcardHost(raw: string): PolicyHost {
  // IDNA over the whole name, as normaliseHost() does for requests (it keeps `*`). WHATWG refuses a name whose
  // last label is a number: requests read such names as IPv4, so the pattern could never match a name.
  const ascii = domainToASCII(raw);
  if (ascii === '') {
    return fail('POLICY_HOST_INVALID', `host ${raw} is not a valid hostname (or ends in a number, which reads as IPv4)`);
  }
  const host = ascii.endsWith('.') ? ascii.slice(0, -1) : ascii;
  const labels = host.split('.');
  if (labels.some((label) => label === '')) return fail('POLICY_HOST_INVALID', `host ${raw} has an empty label`);
  if (labels.length === 1) return fail('POLICY_HOST_WILDCARD', `host ${raw} would match every name`);
  const [first = '', ...rest] = labels;
  if (first.includes('**') && first !== '**') {
    return fail('POLICY_HOST_WILDCARD', `host ${raw}: ** must be the whole first label`);
  }
  // `*ü` becomes `xn--*-eha`: a glob over punycode that matches nothing the author meant.
  if (first.startsWith('xn--')) return fail('POLICY_HOST_WILDCARD', `host ${raw}: a wildcard label must be plain ASCII`);
  if (!WILDCARD_FIRST_LABEL.test(first)) return fail('POLICY_HOST_INVALID', `host ${raw} has an invalid first label`);
  for (const [i, label] of rest.entries()) {
    if (!label.includes('*')) continue;
    if (i === rest.length - 1) return fail('POLICY_HOST_WILDCARD', `host ${raw}: the last label cannot be a wildcard`);
    if (label === '**') return fail('POLICY_HOST_WILDCARD', `host ${raw}: ** is allowed only as the first label`);
    if (label !== '*') {
      return fail('POLICY_HOST_WILDCARD', `host ${raw}: a wildcard outside the first label must be a whole label`);
    }
  }
  const suffix = fixedSuffix(host);
  if (suffix.split('.').length < 2) {
    return fail('POLICY_HOST_WILDCARD', `host ${raw}: the fixed part after the last wildcard needs at least two labels`);
  }
  const problem = nameProblem(labels, host);
  if (problem !== undefined) return fail('POLICY_HOST_INVALID', `host ${raw}: ${problem}`);
  if (PUBLIC_SUFFIXES.has(suffix)) {
    return { ok: true, host, kind: 'wildcard', warning: `host ${raw}: ${suffix} is a public suffix` };
  }
  return { ok: true, host, kind: 'wildcard' };
}

/** Stricter than the request side: policy labels are LDH (no leading or trailing hyphen); `*` labels skip. */
function nameProblem(labels: readonly string[], name: string): string | undefined {
  if (name.length > MAX_NAME_CHARS) return `name longer than ${MAX_NAME_CHARS} characters`;
  for (const label of labels) {
    if (label === '') return 'empty label';
    if (label.length > MAX_LABEL_CHARS) return `label longer than ${MAX_LABEL_CHARS} characters`;
    if (label.includes('*')) continue;
    if (!LABEL.test(label)) return `label ${label} is not a valid DNS label`;
  }
  return undefined;
}

function fail(code: ErrorCode, message: string): PolicyHost {
  return { ok: false, code, message };
}
