// logSink(): the real logger and audit sink writing into memory, so tests read the lines exactly as
// rendered (redaction, OCSF mapping, shorthand) and can wait for an event without sleeping.
import { createAuditSink, type SubscribableAuditSink } from '../../src/telemetry/audit.js';
import { createLogger, type LogFormat, type Logger } from '../../src/telemetry/logger.js';
import type { OcsfEvent } from '../../src/telemetry/ocsf.js';
import { waiterList } from './waiters.js';

/** Bounds a hang only: an audit event that has not come by then is not coming, however loaded the host. */
export const WAIT_FOR_TIMEOUT_MS = 30_000;

export interface LogSink {
  readonly logger: Logger;
  readonly sink: SubscribableAuditSink;
  /** OCSF events in order: parsed back from the JSON lines (json format) or as delivered (shorthand). */
  events(): OcsfEvent[];
  /** Events that carry a verdict (action_id set): the per-connection decision events. */
  decisions(): OcsfEvent[];
  /** Every line written, without the trailing newline. */
  lines(): string[];
  /** Everything written, for canary greps. */
  text(): string;
  /** The first event (already seen or still to come) that matches; rejects after timeoutMs. */
  waitFor(predicate: (event: OcsfEvent) => boolean, options?: { timeoutMs?: number }): Promise<OcsfEvent>;
}

export function logSink(options: { format?: LogFormat; now?: () => number; level?: string } = {}): LogSink {
  const format = options.format ?? 'json';
  const now = options.now ?? Date.now;
  const chunks: string[] = [];
  const recorded = waiterList<OcsfEvent>({ unref: true });
  const events = recorded.items;

  function record(event: OcsfEvent): void {
    recorded.push(event);
  }

  const destination = {
    write(chunk: string): boolean {
      chunks.push(chunk);
      if (format === 'json') {
        for (const line of chunk.split('\n')) {
          if (line.length === 0) continue;
          const parsed = JSON.parse(line) as { ocsf?: OcsfEvent };
          if (parsed.ocsf !== undefined) record(parsed.ocsf);
        }
      }
      return true;
    },
  };
  const logger = createLogger({ format, destination, level: options.level ?? 'debug', now });
  const sink = createAuditSink({ logger, now, format });
  if (format === 'shorthand') sink.subscribe(record);

  return {
    logger,
    sink,
    events: () => [...events],
    decisions: () => events.filter((event) => event.action_id !== undefined),
    lines: () => chunks.join('').split('\n').filter((line) => line.length > 0),
    text: () => chunks.join(''),
    waitFor: (predicate, waitOptions = {}) =>
      recorded.waitFor(predicate, waitOptions.timeoutMs ?? WAIT_FOR_TIMEOUT_MS, 'audit event', () => `saw ${events.length}:\n${chunks.join('')}`),
  };
}
