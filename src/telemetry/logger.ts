// The pino logger every part writes through: JSON lines, or the shorthand text format (reference §9.2)
// rendered from the same JSON. Redaction here is the second line of defence after the Secret wrapper.
import { pino } from 'pino';

export type Logger = pino.Logger;
export const LOG_FORMATS = ['json', 'shorthand'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const REDACT_CENSOR = '[redacted]';
export const REDACTED_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key'] as const;
export const REDACTED_KEYS = ['secret', 'value', 'password'] as const;
/** Audit lines carry this key (the event time) in shorthand mode; `ocsf` (the object) in JSON mode. */
export const AUDIT_TIME_KEY = 'ocsf_time';

const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/**
 * pino redact paths: each header (lower-case as node delivers it, and Title-Case as callers may write it)
 * at the top level and up to two objects deep; each key at the top level and one object deep.
 */
export function redactPaths(): string[] {
  const paths: string[] = [];
  for (const header of REDACTED_HEADERS) {
    const title = header.replace(/(^|-)([a-z])/g, (_m, dash: string, letter: string) => dash + letter.toUpperCase());
    for (const prefix of ['headers', '*.headers', '*.*.headers']) paths.push(`${prefix}["${header}"]`, `${prefix}["${title}"]`);
  }
  for (const key of REDACTED_KEYS) paths.push(key, `*.${key}`);
  return paths;
}

export interface LogDestination {
  write(chunk: string): unknown;
  flush?(callback?: (err?: Error | null) => void): unknown;
}

/** Renders one pino JSON line as text: audit lines become `<RFC 3339> OCSF <shorthand>`. */
export function renderShorthandLine(json: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const { level, time, msg, pid: _pid, hostname: _hostname, [AUDIT_TIME_KEY]: auditTime, ocsf, ...rest } = record;
  const ocsfTime = typeof ocsf === 'object' && ocsf !== null ? (ocsf as { time?: unknown }).time : undefined;
  const eventTime = typeof auditTime === 'number' ? auditTime : typeof ocsfTime === 'number' ? ocsfTime : undefined;
  const at = eventTime ?? time;
  const stamp = new Date(typeof at === 'number' ? at : 0).toISOString();
  const text = typeof msg === 'string' ? msg : '';
  if (eventTime !== undefined) return `${stamp} OCSF ${text}\n`;
  const tag = LEVEL_NAMES[typeof level === 'number' ? level : 30] ?? 'INFO';
  const extra = Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : '';
  return `${stamp} ${tag} ${text}${extra}\n`;
}

type PinoInternals = Record<symbol, unknown>;
const S = pino.symbols;

/**
 * A writer for lines whose fields are already rendered JSON (audit events: built from closed fields and
 * cleaned by ocsf.ts): it writes exactly the line `logger.info({ [key]: value }, msg)` would, to the same
 * destination, but without pino's per-call serialisation and wildcard redaction. Undefined when the logger
 * uses a feature that would change the line (mixin, hooks, log formatter, nested key, serializer for the
 * key or msg, msg prefix, a multistream needing metadata): callers then log through pino itself.
 */
export function createLineWriter(logger: Logger, key: string): ((json: string, msg: string) => void) | undefined {
  const internals = logger as unknown as PinoInternals;
  const stream = internals[S.streamSym] as (LogDestination & Record<symbol, unknown>) | undefined;
  const serializers = (internals[S.serializersSym] ?? {}) as Record<string, unknown>;
  const formatters = (internals[S.formattersSym] ?? {}) as { log?: unknown };
  const hooks = (internals[S.hooksSym] ?? {}) as { streamWrite?: unknown };
  const messageKey = internals[S.messageKeySym];
  const levelPrefix = (internals[S.lsCacheSym] as Record<number, string> | undefined)?.[30];
  const time = internals[S.timeSym];
  const end = internals[S.endSym];
  if (
    stream === undefined ||
    typeof stream.write !== 'function' ||
    stream[S.needsMetadataGsym] === true ||
    internals[S.mixinSym] ||
    internals[S.nestedKeySym] ||
    (logger as { msgPrefix?: string }).msgPrefix ||
    formatters.log !== undefined ||
    hooks.streamWrite !== undefined ||
    Object.hasOwn(serializers, key) ||
    messageKey !== 'msg' ||
    typeof levelPrefix !== 'string' ||
    typeof time !== 'function' ||
    typeof end !== 'string' ||
    typeof internals[S.chindingsSym] !== 'string'
  ) {
    return undefined;
  }
  const fieldPrefix = `,${JSON.stringify(key)}:`;
  const timeOf = time as () => string;
  return function writeLine(json: string, msg: string): void {
    // Bindings are read per line: setBindings() may change them after the writer was made.
    const chindings = internals[S.chindingsSym] as string;
    stream.write(`${levelPrefix}${timeOf()}${chindings}${fieldPrefix}${json},"msg":${JSON.stringify(msg)}${end}`);
  };
}

/** Default stdout: pending lines are written once they reach this many bytes (one write(2) per ~14 audit
 *  lines instead of one per request: each write is a thread-pool hop on the proxy's core)... */
export const LOG_BATCH_BYTES = 16_384;
/** ...at most this many bytes per write(2)... */
export const LOG_MAX_WRITE_BYTES = 65_536;
/** ...and at least this often when traffic is light, so an audit line is on disk within this delay. */
export const LOG_FLUSH_INTERVAL_MS = 200;

/**
 * Asynchronous stdout in sonic-boom's buffer mode. In its string mode every line appended to a pending
 * string re-measures the whole pending string (Buffer.byteLength), which cost more than rendering the
 * audit event itself; here each line is encoded once and pending lines are joined once per write(2).
 * pino still flushes it synchronously on exit, and `logger.flush()` reaches it through `flush`.
 */
function stdoutDestination(): LogDestination {
  const boom = pino.destination({
    dest: 1,
    sync: false,
    contentMode: 'buffer',
    minLength: LOG_BATCH_BYTES,
    maxWrite: LOG_MAX_WRITE_BYTES,
    periodicFlush: LOG_FLUSH_INTERVAL_MS,
  }) as unknown as {
    write(chunk: Buffer): boolean;
    flush(callback?: (err?: Error | null) => void): void;
  };
  return {
    write: (chunk: string) => boom.write(Buffer.from(chunk)),
    flush: (callback) => boom.flush(callback),
  };
}

function shorthandDestination(target: LogDestination): LogDestination {
  return {
    write(chunk: string) {
      // pino writes exactly one JSON line per call.
      return target.write(renderShorthandLine(chunk));
    },
    flush(callback) {
      if (target.flush === undefined) callback?.(null);
      else target.flush(callback);
    },
  };
}

/**
 * A pino logger. `destination` defaults to asynchronous stdout (call `logger.flush()` before exit);
 * tests pass an in-memory stream. `now` feeds pino's `time` so lines follow an injected clock.
 */
export function createLogger(options: {
  format: LogFormat;
  destination?: NodeJS.WritableStream | pino.DestinationStream | LogDestination;
  level?: string;
  now?: () => number;
}): Logger {
  const base = (options.destination ?? stdoutDestination()) as LogDestination;
  const destination = options.format === 'shorthand' ? shorthandDestination(base) : base;
  const now = options.now;
  return pino(
    {
      level: options.level ?? 'info',
      base: null,
      redact: { paths: redactPaths(), censor: REDACT_CENSOR },
      ...(now === undefined ? {} : { timestamp: () => `,"time":${now()}` }),
    },
    destination as pino.DestinationStream,
  );
}
