// The built-in `boundary/secret-scan` (docs/policy.md#secret-scanner): every known kind of secret (secret-patterns.ts)
// and the entry's own patterns, in a request body or client text message, blocked (the default) or replaced with
// [REDACTED]. Findings name the kind and count, never the match. Pure; one implementation per policy entry.

import type { SecretScanMode } from '../policy/middleware-builtins.js';
import type { UserPattern } from '../policy/secret-patterns.js';
import type { MiddlewareEntry } from '../policy/types.js';
import type { EntryResult, SyncMiddleware, TextResult } from './implementation.js';
import type { MiddlewareFinding } from './outcome.js';
import { REDACTED } from './regex.js';
import { BUILTIN_SECRET_PATTERNS, type SecretPattern } from './secret-patterns.js';

/** Largest body or message the scanner reads; a larger one fails the stage (on_error decides). */
export const MAX_SECRET_SCAN_PAYLOAD_BYTES = 256 * 1024;
/** The reason code of a block: fixed, whatever was found. */
export const SECRET_DETECTED = 'secret_detected';
/** Finding types: `secret.<kind>` for the built-in set, `secret.custom.<name>` for the entry's own patterns. */
const FINDING_PREFIX = 'secret.';
const CUSTOM_PREFIX = 'custom.';

interface Match {
  readonly start: number;
  readonly end: number;
  readonly kind: string;
}

function matchesOf(text: string, patterns: readonly SecretPattern[]): Match[] {
  const out: Match[] = [];
  for (const { kind, regex, accept } of patterns) {
    regex.lastIndex = 0;
    for (let m = regex.exec(text); m !== null; m = regex.exec(text)) {
      // A user pattern may match empty text somewhere (a lookahead): step past it.
      if (m[0].length === 0) {
        regex.lastIndex += 1;
        continue;
      }
      if (accept === undefined || accept(m[0])) out.push({ start: m.index, end: m.index + m[0].length, kind });
      // A rejected match may hold a real one further in (a bogus segment before a JWT): look again one character on.
      else regex.lastIndex = m.index + 1;
    }
  }
  return out.sort((a, b) => a.start - b.start || b.end - a.end);
}

function findingsOf(matches: readonly Match[]): MiddlewareFinding[] {
  const counts = new Map<string, number>();
  for (const { kind } of matches) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return [...counts].map(([kind, count]) => ({ type: `${FINDING_PREFIX}${kind}`, count }));
}

/** `text` with every match replaced; overlapping matches become one replacement. */
function redacted(text: string, matches: readonly Match[]): string {
  let out = '';
  let from = 0;
  for (const { start, end } of matches) {
    if (start < from) {
      from = Math.max(from, end);
      continue;
    }
    out += text.slice(from, start) + REDACTED;
    from = end;
  }
  return out + text.slice(from);
}

/** What the entry's config says, as load accepted it (policy/secret-patterns.ts). */
function scannerConfig(config: Readonly<Record<string, unknown>>): { mode: SecretScanMode; patterns: SecretPattern[] } {
  const mode = (config.mode as SecretScanMode | undefined) ?? 'block';
  const user = (config.patterns as readonly UserPattern[] | undefined) ?? [];
  const patterns = user.map((p) => ({ kind: `${CUSTOM_PREFIX}${p.name}`, regex: new RegExp(p.regex, 'g') }));
  return { mode, patterns: [...BUILTIN_SECRET_PATTERNS.map((p) => ({ ...p, regex: new RegExp(p.regex) })), ...patterns] };
}

/** The scanner of one policy entry; its regexes are its own (a global regex keeps state between calls). */
export function createSecretScan(entry: MiddlewareEntry): SyncMiddleware {
  const { mode, patterns } = scannerConfig(entry.config);

  function scan(text: string): { verdict: 'allow'; text: string | undefined; findings: MiddlewareFinding[] } | { verdict: 'deny'; findings: MiddlewareFinding[] } {
    const matches = matchesOf(text, patterns);
    if (matches.length === 0) return { verdict: 'allow', text: undefined, findings: [] };
    const findings = findingsOf(matches);
    if (mode === 'block') return { verdict: 'deny', findings };
    return { verdict: 'allow', text: redacted(text, matches), findings };
  }

  function evaluateBody(body: Buffer): EntryResult {
    if (body.length > MAX_SECRET_SCAN_PAYLOAD_BYTES) return { verdict: 'failed', failure: 'payload-too-large' };
    // Latin-1 maps each byte to one character and back: a body that is not UTF-8 is scanned too, and what is not
    // replaced goes on byte for byte. Every pattern is ASCII.
    const result = scan(body.toString('latin1'));
    if (result.verdict === 'deny') return { verdict: 'deny', reasonCode: SECRET_DETECTED, findings: result.findings };
    return { verdict: 'allow', body: result.text === undefined ? undefined : Buffer.from(result.text, 'latin1'), findings: result.findings };
  }

  function evaluateText(text: string): TextResult {
    if (Buffer.byteLength(text, 'utf8') > MAX_SECRET_SCAN_PAYLOAD_BYTES) return { verdict: 'failed', failure: 'payload-too-large' };
    const result = scan(text);
    if (result.verdict === 'deny') return { verdict: 'deny', reasonCode: SECRET_DETECTED, findings: result.findings };
    return { verdict: 'allow', text: result.text, findings: result.findings };
  }

  return Object.freeze({
    bindings: new Set(['http-request', 'websocket-message'] as const),
    maxPayloadBytes: MAX_SECRET_SCAN_PAYLOAD_BYTES,
    evaluateBody,
    evaluateText,
  });
}
