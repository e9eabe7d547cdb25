// The AuditSink every component emits into: one log line per event (OCSF JSON or shorthand text), and a
// fan-out of the OCSF object to subscribers (the control channel). Never throws into the emitter.
import { createAuditLineWriter } from './audit-line.js';
import { createEventUids, uidText } from './event-uid.js';
import type { AuditEvent, AuditSink, Severity } from './event.js';
import { AUDIT_TIME_KEY, createRawLineWriter, createShorthandAuditWriter, type LogFormat, type Logger, type RawLineLevel } from './logger.js';
import { type OcsfEvent, type OcsfMeta, type ProductInfo, toOcsf, toShorthand } from './ocsf.js';

type AuditListener = (ocsf: OcsfEvent) => void;

export interface SubscribableAuditSink extends AuditSink {
  /** The listener receives every later event's OCSF object; returns the unsubscribe function. */
  subscribe(listener: AuditListener): () => void;
}

const AUDIT_LEVEL = 'info';
const QUIET_LEVELS = new Set(['warn', 'error', 'fatal']);
const ERROR_SEVERITIES: ReadonlySet<Severity> = new Set(['HIGH', 'CRIT', 'FATAL']);

/**
 * The pino level of an event's line. An event that carries `unmapped.error` reports a failure of boundary's
 * own (a control attempt, a session, a pushed policy): warn, or error from severity HIGH up, so a warn-and-above
 * filter keeps it. Every other event is the audit trail, at info, whatever its severity: a denial is a
 * decision working, not a fault.
 */
export function auditLevel(event: AuditEvent): RawLineLevel {
  if (event.unmapped?.error === undefined) return AUDIT_LEVEL;
  return ERROR_SEVERITIES.has(event.severity) ? 'error' : 'warn';
}

/**
 * JSON format: one pino line `{"level":30,"time":...,"ocsf":{...OCSF object...},"msg":"<shorthand>"}`
 * (the OCSF object nested under `ocsf`, never flattened, so it cannot collide with pino's own keys).
 * Shorthand format: `<RFC 3339 event time> OCSF <shorthand>` (rendered by the logger's shorthand mode).
 * Audit lines are written at info (failures at warn or error, see auditLevel) even when the logger is set to
 * warn/error/fatal (an audit trail is not debug output); `silent` stays silent. JSON lines are written by a line writer on the logger's own
 * destination (the same bytes pino would write), not through pino's wildcard redaction: the OCSF object is
 * built from closed fields and cleaned by ocsf.ts, which also censors secret-shaped keys under `unmapped`.
 */
export function createAuditSink(options: {
  logger: Logger;
  now: () => number;
  format: LogFormat;
  product?: ProductInfo;
}): SubscribableAuditSink {
  const { logger, now, format, product } = options;
  const audit = QUIET_LEVELS.has(logger.level) ? logger.child({}, { level: AUDIT_LEVEL }) : logger;
  const listeners = new Set<AuditListener>();
  const writer = format === 'json' ? createRawLineWriter(audit, 'ocsf') : undefined;
  const writeOcsf = writer === undefined ? undefined : createAuditLineWriter(writer, product, now);
  const writeShorthand = format === 'json' ? undefined : createShorthandAuditWriter(audit);

  /** A random v4 UUID's text as bytes (hex digits and dashes): the line writer relies on it (see createAuditLineWriter). */
  const eventUid = createEventUids();
  function metaFor(time: number, uid = uidText(eventUid())): OcsfMeta & { readonly uid: string } {
    return product === undefined ? { time, uid } : { time, uid, product };
  }

  function deliver(ocsf: OcsfEvent): void {
    for (const listener of listeners) {
      try {
        listener(ocsf);
      } catch (err) {
        logger.warn({ err }, 'an audit subscriber threw; the event was still logged');
      }
    }
  }

  return {
    emit(event: AuditEvent): void {
      try {
        const time = now();
        const level = auditLevel(event);
        if (format !== 'json') {
          const line = toShorthand(event);
          // A time JSON cannot carry (NaN) changes the pino line's meaning: leave that to pino.
          if (writeShorthand === undefined || !Number.isFinite(time)) audit[level]({ [AUDIT_TIME_KEY]: time }, line);
          else if (audit.isLevelEnabled(level)) writeShorthand(time, line);
          if (listeners.size > 0) deliver(toOcsf(event, metaFor(time)));
          return;
        }
        const uid = eventUid();
        // Subscribers get the object; the line is rendered straight to JSON text (same bytes, no object).
        const ocsf = listeners.size > 0 ? toOcsf(event, metaFor(time, uidText(uid))) : undefined;
        if (writeOcsf === undefined) audit[level]({ ocsf: ocsf ?? toOcsf(event, metaFor(time, uidText(uid))) }, toShorthand(event));
        else if (audit.isLevelEnabled(level)) writeOcsf(event, time, uid, level);
        if (ocsf !== undefined) deliver(ocsf);
      } catch (err) {
        // A malformed event must not take down the connection that emitted it; say so once, and go on.
        try {
          logger.error({ err }, 'an audit event could not be rendered');
        } catch {
          // The logger itself failed: nothing else can be done from here.
        }
      }
    },
    subscribe(listener: AuditListener): () => void {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
  };
}
