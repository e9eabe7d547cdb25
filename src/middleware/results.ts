// What a service may answer, checked before anything of it is used: the decision, the reason code, a replacement
// within the payload limit, header mutations, findings and metadata within their limits. Anything else makes the
// whole result a failure (`invalid-result`), which the entry's on_error decides. The service's free text is dropped
// here, unread. Pure.

import type { EntryResult, HeaderMutation, TextResult } from './implementation.js';
import { mutationProblem } from './service-headers.js';
import { isReasonCode, type MiddlewareFinding } from './outcome.js';

/** Findings one result may carry. */
export const MAX_FINDINGS = 32;
/** Metadata entries one result may carry (never logged). */
export const MAX_METADATA_ENTRIES = 64;
/** Metadata key and value bytes one result may carry. */
export const MAX_METADATA_BYTES = 32 * 1024;
/**
 * The finding type boundary logs for a service's findings: a service's own type, label and levels are its text, and
 * stay out of the log like its reason.
 */
export const SERVICE_FINDING = 'middleware.service';

const INVALID: EntryResult = Object.freeze({ verdict: 'failed', failure: 'invalid-result' });

/** The parts of every result message: the reason code, findings and metadata. */
export interface ResultDiagnostics {
  readonly reason_code?: unknown;
  readonly findings?: unknown;
  readonly metadata?: unknown;
}

/** The reason code ('' is none), or `invalid` when the service sent one outside the grammar. */
export function reasonCodeOf(raw: unknown): string | undefined | 'invalid' {
  if (raw === undefined || raw === '') return undefined;
  return typeof raw === 'string' && isReasonCode(raw) ? raw : 'invalid';
}

/** The findings as boundary logs them (one, with the total count), or `invalid` past the limits. */
export function findingsOf(d: ResultDiagnostics): readonly MiddlewareFinding[] | 'invalid' {
  const findings = Array.isArray(d.findings) ? (d.findings as { count?: unknown }[]) : [];
  if (findings.length > MAX_FINDINGS) return 'invalid';
  const metadata = d.metadata !== null && typeof d.metadata === 'object' ? Object.entries(d.metadata as Record<string, unknown>) : [];
  if (metadata.length > MAX_METADATA_ENTRIES) return 'invalid';
  let bytes = 0;
  for (const [key, value] of metadata) bytes += key.length + String(value).length;
  if (bytes > MAX_METADATA_BYTES) return 'invalid';
  if (findings.length === 0) return [];
  const count = findings.reduce((sum, f) => sum + (typeof f.count === 'number' && f.count > 0 ? f.count : 1), 0);
  return [{ type: SERVICE_FINDING, count }];
}

interface RawMutation {
  readonly operation?: string;
  readonly write?: { readonly name?: unknown; readonly value?: unknown; readonly on_existing?: unknown };
  readonly remove?: { readonly name?: unknown };
}

const ON_EXISTING: Readonly<Record<string, 'append' | 'overwrite' | 'skip'>> = {
  EXISTING_HEADER_ACTION_APPEND: 'append',
  EXISTING_HEADER_ACTION_OVERWRITE: 'overwrite',
  EXISTING_HEADER_ACTION_SKIP: 'skip',
};

/** The mutations in boundary's terms, or `invalid` when one is malformed or touches a protected field. */
export function mutationsOf(raw: unknown): readonly HeaderMutation[] | 'invalid' {
  const list = Array.isArray(raw) ? (raw as RawMutation[]) : [];
  const out: HeaderMutation[] = [];
  for (const m of list) {
    if (m.operation === 'write' && m.write !== undefined) {
      const onExisting = ON_EXISTING[String(m.write.on_existing)];
      if (typeof m.write.name !== 'string' || typeof m.write.value !== 'string' || onExisting === undefined) return 'invalid';
      out.push({ op: 'write', name: m.write.name, value: m.write.value, onExisting });
    } else if (m.operation === 'remove' && typeof m.remove?.name === 'string') {
      out.push({ op: 'remove', name: m.remove.name });
    } else return 'invalid';
  }
  return mutationProblem(out) === undefined ? out : 'invalid';
}

/** An HttpRequestResult as the chain takes it; `maxPayloadBytes` bounds a replacement body. */
export function httpRequestResult(raw: Record<string, unknown>, maxPayloadBytes: number): EntryResult {
  const reasonCode = reasonCodeOf(raw.reason_code);
  const findings = findingsOf(raw);
  if (reasonCode === 'invalid' || findings === 'invalid') return INVALID;
  if (raw.decision === 'DECISION_DENY') return { verdict: 'deny', reasonCode, findings };
  if (raw.decision !== 'DECISION_ALLOW') return INVALID;
  const mutations = mutationsOf(raw.header_mutations);
  if (mutations === 'invalid') return INVALID;
  let body: Buffer | undefined;
  if (raw.has_body === true) {
    body = Buffer.isBuffer(raw.body) ? raw.body : Buffer.alloc(0);
    if (body.length > maxPayloadBytes) return { verdict: 'failed', failure: 'payload-too-large' };
  }
  return { verdict: 'allow', body, findings, ...(mutations.length === 0 ? {} : { mutations }) };
}

/** A WebSocketMessageResult as the relay takes it; `maxPayloadBytes` bounds a replacement, in UTF-8 bytes. */
export function webSocketMessageResult(raw: Record<string, unknown>, maxPayloadBytes: number): TextResult {
  const reasonCode = reasonCodeOf(raw.reason_code);
  const findings = findingsOf(raw);
  if (reasonCode === 'invalid' || findings === 'invalid') return { verdict: 'failed', failure: 'invalid-result' };
  if (raw.decision === 'DECISION_DENY') return { verdict: 'deny', reasonCode, findings };
  if (raw.decision !== 'DECISION_ALLOW') return { verdict: 'failed', failure: 'invalid-result' };
  if (raw.has_text !== true) return { verdict: 'allow', text: undefined, findings };
  const text = typeof raw.text === 'string' ? raw.text : '';
  if (Buffer.byteLength(text, 'utf8') > maxPayloadBytes) return { verdict: 'failed', failure: 'payload-too-large' };
  return { verdict: 'allow', text, findings };
}
