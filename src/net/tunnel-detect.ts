// Classifies the labels a workload put under an allowed wildcard as ordinary or tunnelling-shaped (docs/dns.md#tunnelling).
// Pure: no clock, no state, no I/O; the per-parent volume window and the findings live in lookup-gate.ts.

/** What the lookup gate does with a tunnelling-shaped name: nothing, a finding only, or a finding and a refusal. */
export const TUNNEL_DETECTION_MODES = ['off', 'audit', 'enforce'] as const;
export type TunnelDetectionMode = (typeof TUNNEL_DETECTION_MODES)[number];
/**
 * Findings only (docs/dns.md#tunnelling). Enforce refuses every false positive, and a refused CDN or bucket name breaks
 * the workload with no recourse but a config change; the rate limits already bound what a tunnel can carry meanwhile.
 */
export const DEFAULT_TUNNEL_DETECTION: TunnelDetectionMode = 'audit';

/**
 * Why a name looks like a tunnel. The shape signals come from classifySubdomain; `many-names` is the volume signal
 * lookup-gate.ts adds (too many new names under one parent in a window).
 */
export const TUNNEL_SIGNALS = ['long-name', 'label-chain', 'hex-encoded', 'base32-encoded', 'base64-encoded', 'high-entropy', 'many-names'] as const;
export type TunnelSignal = (typeof TUNNEL_SIGNALS)[number];

/**
 * Characters under the wildcard base beyond which a name is long whatever it spells. The longest benign shape in the
 * corpus is an S3 virtual host under `**.amazonaws.com`: a 63-character bucket plus `.s3.dualstack.<region>`, 90.
 */
export const MAX_BENIGN_SUBDOMAIN_CHARS = 100;
/** Labels under the wildcard base beyond which the name is a chain (SRV-style k8s names reach 5). */
export const MAX_BENIGN_SUBDOMAIN_LABELS = 6;
/**
 * Random-looking characters (see randomRun) a benign name carries at most. Cloud ids reach 32: an EKS endpoint or an
 * R2 account (32 hex), a Lambda function URL (32 base36). Above it a name carries more than ~20 bytes of encoded data.
 */
export const MAX_BENIGN_RANDOM_CHARS = 34;
/** A token shorter than this is not judged: `s3`, `ec2`, `gr7`, `v1` are words of the cloud, not data. */
const MIN_JUDGED_TOKEN_CHARS = 6;
/** All-digit tokens up to this long are numbers (12-digit AWS accounts, ports, dates); longer ones are data. */
const MAX_NUMBER_TOKEN_CHARS = 16;
/** Letters-only tokens at least this long are judged for pronounceability; shorter ones are words or names. */
const MIN_JUDGED_WORD_CHARS = 12;
/** Below this share of vowels a letters-only token is not a word (English runs ~0.38; uniform letters 0.23). */
const MIN_WORD_VOWEL_SHARE = 0.2;
/** Below this share of vowels among its letters a long token with digits is data (uniform letters: 0.23). */
const MIN_MIXED_VOWEL_SHARE = 0.3;
/** Letter/digit alternations per character from which a mixed token is data: hex ~0.47, base32 ~0.30, words ~0.1. */
const MIN_RANDOM_TRANSITION_SHARE = 0.15;

const HEX = /^[0-9a-f]+$/;
const BASE32 = /^[a-z2-7]+$/;
const VOWELS = new Set(['a', 'e', 'i', 'o', 'u', 'y']);

/** The labels of `name` under `base` ('' for the root), without the joining dot; '' when name is not under base. */
export function subdomainUnder(name: string, base: string): string {
  if (base === '') return name;
  if (name.length <= base.length + 1 || !name.endsWith(base) || name[name.length - base.length - 1] !== '.') return '';
  return name.slice(0, name.length - base.length - 1);
}

/** What classifySubdomain judges: lengths, and the random-looking characters (see randomRun) pooled over every label. */
export interface SubdomainShape {
  readonly chars: number;
  readonly labels: number;
  readonly randomChars: number;
}

export function measureSubdomain(sub: string): SubdomainShape & { readonly random: string } {
  const labels = sub.split('.');
  let random = '';
  for (const label of labels) random += randomPart(label);
  return { chars: sub.length, labels: labels.length, randomChars: random.length, random };
}

/** The shape signals of the labels under a wildcard base (see subdomainUnder); empty for an ordinary name. */
export function classifySubdomain(sub: string): readonly TunnelSignal[] {
  if (sub === '') return [];
  const shape = measureSubdomain(sub);
  const signals: TunnelSignal[] = [];
  if (shape.chars > MAX_BENIGN_SUBDOMAIN_CHARS) signals.push('long-name');
  if (shape.labels > MAX_BENIGN_SUBDOMAIN_LABELS) signals.push('label-chain');
  if (shape.randomChars > MAX_BENIGN_RANDOM_CHARS) signals.push(encodingOf(shape.random, sub));
  return signals;
}

/** Which alphabet the random-looking characters fit: the narrowest of hex, base32, base64url; else high entropy. */
function encodingOf(random: string, sub: string): TunnelSignal {
  if (HEX.test(random)) return 'hex-encoded';
  if (BASE32.test(random)) return 'base32-encoded';
  // base64url keeps `-` and `_` as data: a name full of them beside random runs is that alphabet, lower-cased.
  return /[-_]/.test(sub) ? 'base64-encoded' : 'high-entropy';
}

/**
 * The random-looking tokens of one label, split at `-` and `_`. base64url keeps those two as data, so a label that is
 * mostly random counts whole, bar plain numbers (`a<31 hex>-<10 digits>` is an ELB name, not 42 characters of data).
 */
function randomPart(label: string): string {
  const tokens = label.split(/[-_]/);
  if (tokens.length === 1) return randomRun(label) ? label : '';
  let random = '';
  for (const token of tokens) if (randomRun(token)) random += token;
  if (random.length * 2 < label.length - tokens.length + 1) return random;
  return tokens.filter((t) => !/^[0-9]+$/.test(t) || t.length > MAX_NUMBER_TOKEN_CHARS).join('');
}

/** True when a token reads as data rather than a word, a number or a short id. */
function randomRun(token: string): boolean {
  if (token.length < MIN_JUDGED_TOKEN_CHARS) return false;
  let digits = 0;
  let vowels = 0;
  let transitions = 0;
  let wasDigit = false;
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    const digit = c >= 0x30 && c <= 0x39;
    if (digit) digits++;
    else if (VOWELS.has(token[i] ?? '')) vowels++;
    if (i > 0 && digit !== wasDigit) transitions++;
    wasDigit = digit;
  }
  if (digits === token.length) return token.length > MAX_NUMBER_TOKEN_CHARS;
  if (digits === 0) return token.length >= MIN_JUDGED_WORD_CHARS && vowels / token.length < MIN_WORD_VOWEL_SHARE;
  // base32 has few digits, so alternations alone miss some of it; its letters are also short of vowels.
  if (token.length >= MIN_JUDGED_WORD_CHARS && vowels / (token.length - digits) < MIN_MIXED_VOWEL_SHARE) return true;
  return transitions / (token.length - 1) >= MIN_RANDOM_TRANSITION_SHARE;
}
