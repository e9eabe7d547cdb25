// Policy-side host normalisation and the wildcard grammar (reference §3.2): lower-case, one trailing dot, IDNA
// to A-labels, canonical IP literals. Pure; says what is wrong, never matches requests (that is match.ts).

import { domainToASCII } from 'node:url';
import type { ErrorCode } from '../errors.js';
import { formatIp, parseIp } from '../net/ip.js';

export const MAX_LABEL_CHARS = 63;
export const MAX_NAME_CHARS = 253;

/** Fixed wildcard suffixes that are public suffixes: `*.co.uk` would cover every registrant (warning only). */
export const PUBLIC_SUFFIXES: ReadonlySet<string> = new Set([
  'co.uk', 'org.uk', 'ac.uk', 'gov.uk', 'me.uk', 'com.au', 'net.au', 'org.au', 'co.nz', 'co.jp', 'ne.jp',
  'or.jp', 'co.kr', 'com.br', 'com.cn', 'com.mx', 'com.tr', 'co.in', 'co.za', 'com.sg', 'com.hk',
  'github.io', 'gitlab.io', 'herokuapp.com', 'appspot.com', 'azurewebsites.net', 'cloudfront.net',
  'netlify.app', 'vercel.app', 'pages.dev', 'workers.dev', 'web.app', 'firebaseapp.com', 'blogspot.com',
  's3.amazonaws.com', 'fly.dev', 'onrender.com', 'ngrok.io', 'trycloudflare.com',
]);

export type PolicyHost =
  | { readonly ok: true; readonly host: string; readonly kind: 'exact' | 'wildcard' | 'ip'; readonly warning?: string }
  | { readonly ok: false; readonly code: ErrorCode; readonly message: string };

const GLOB_CHARS = /[?[\]{},]/;
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$/;
const WILDCARD_FIRST_LABEL = /^[a-z0-9_*-]+$/;

/** Normalises a policy `host`. `tcp` rejects a trailing dot and IP literals (V9). */
export function normalisePolicyHost(raw: string, options: { tcp?: boolean } = {}): PolicyHost {
  if (raw.length === 0) return fail('POLICY_HOST_INVALID', 'host is empty');
  if (/[\s%/@\\]/.test(raw) || /[\u0000-\u001f\u007f]/.test(raw)) {
    return fail('POLICY_HOST_INVALID', `host ${JSON.stringify(raw)} contains characters a hostname cannot hold`);
  }
  if (raw.startsWith('[') && raw.endsWith(']')) return ipv6Host(raw.slice(1, -1), options);
  if (raw.includes(':')) return ipv6Host(raw, options);
  let host = raw.toLowerCase();
  if (host.endsWith('.')) {
    if (options.tcp === true) return fail('POLICY_TCP_HOST', `protocol tcp needs a host without a trailing dot: ${raw}`);
    host = host.slice(0, -1);
  }
  if (GLOB_CHARS.test(host)) {
    return fail('POLICY_HOST_WILDCARD', `host ${raw} uses glob syntax; hosts accept only * and ** wildcards`);
  }
  if (host.includes('*')) return wildcardHost(raw, host);
  const ascii = domainToASCII(host);
  if (ascii === '') return fail('POLICY_HOST_INVALID', `host ${raw} is not a valid hostname`);
  const ip = parseIp(ascii);
  if (ip !== undefined) {
    if (options.tcp === true) return fail('POLICY_TCP_HOST', `protocol tcp needs a DNS hostname, not the IP ${raw}`);
    return { ok: true, host: formatIp(ip), kind: 'ip' };
  }
  const problem = nameProblem(ascii.split('.'), ascii);
  if (problem !== undefined) return fail('POLICY_HOST_INVALID', `host ${raw}: ${problem}`);
  return { ok: true, host: ascii, kind: 'exact' };
}

/** The labels after the last wildcard label (`example.com` for `*.s3.*.example.com`). */
export function fixedSuffix(pattern: string): string {
  const labels = pattern.split('.');
  let last = -1;
  labels.forEach((label, i) => {
    if (label.includes('*')) last = i;
  });
  return labels.slice(last + 1).join('.');
}

function ipv6Host(text: string, options: { tcp?: boolean }): PolicyHost {
  const ip = text.includes('%') ? undefined : parseIp(text.toLowerCase());
  if (ip === undefined || ip.family !== 6) {
    return fail('POLICY_HOST_INVALID', `host ${text} is not a valid IPv6 literal (zone ids are not allowed)`);
  }
  if (options.tcp === true) return fail('POLICY_TCP_HOST', `protocol tcp needs a DNS hostname, not the IP ${text}`);
  return { ok: true, host: formatIp(ip), kind: 'ip' };
}

function wildcardHost(raw: string, host: string): PolicyHost {
  const labels = host.split('.');
  if (labels.some((label) => label === '')) return fail('POLICY_HOST_INVALID', `host ${raw} has an empty label`);
  if (labels.length === 1) return fail('POLICY_HOST_WILDCARD', `host ${raw} would match every name`);
  const [first = '', ...rest] = labels;
  if (first.includes('**') && first !== '**') {
    return fail('POLICY_HOST_WILDCARD', `host ${raw}: ** must be the whole first label`);
  }
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
  const suffixLabels = suffix.split('.');
  if (suffixLabels.length < 2) {
    return fail('POLICY_HOST_WILDCARD', `host ${raw}: the fixed part after the last wildcard needs at least two labels`);
  }
  const converted: string[] = [];
  for (const label of labels) {
    if (label.includes('*')) {
      converted.push(label);
      continue;
    }
    const ascii = domainToASCII(label);
    if (ascii === '' || ascii.includes('.')) return fail('POLICY_HOST_INVALID', `host ${raw} has an invalid label ${label}`);
    converted.push(ascii);
  }
  const problem = nameProblem(converted, converted.join('.'));
  if (problem !== undefined) return fail('POLICY_HOST_INVALID', `host ${raw}: ${problem}`);
  const normalised = converted.join('.');
  const asciiSuffix = fixedSuffix(normalised);
  if (PUBLIC_SUFFIXES.has(asciiSuffix)) {
    return { ok: true, host: normalised, kind: 'wildcard', warning: `host ${raw}: ${asciiSuffix} is a public suffix` };
  }
  return { ok: true, host: normalised, kind: 'wildcard' };
}

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
