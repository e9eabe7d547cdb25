// The pino logger every part writes through: JSON lines, or the shorthand text format (docs/events.md#shorthand-line)
// rendered from the same JSON. Redaction here is the second line of defence after the Secret wrapper.
import type { DestinationStream, Logger as PinoLogger } from 'pino';
import { pino } from './pino.js';
import type { ErrorCode } from '../shared/errors.js';
import { createBufferedDestination, joinParts, LOG_PENDING_MAX_BYTES } from './log-destination.js';

export type Logger = PinoLogger;
export const LOG_FORMATS = ['json', 'shorthand'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const REDACT_CENSOR = '[redacted]';
const REDACTED_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key'] as const;
const REDACTED_KEYS = ['secret', 'value', 'password'] as const;
/** Audit lines carry this key (the event time) in shorthand mode; `ocsf` (the object) in JSON mode. */
export const AUDIT_TIME_KEY = 'ocsf_time';

const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** The levels a raw line may be written at (see createRawLineWriter), with pino's numbers for them. */
const RAW_LINE_LEVELS = { info: 30, warn: 40, error: 50 } as const;
export type RawLineLevel = keyof typeof RAW_LINE_LEVELS;

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

/** Part of a line: text, the UTF-8 bytes of text that neither starts nor ends inside a surrogate pair, or a
 *  non-negative safe integer, written in decimal as JSON writes it (no string is made of it). */
export type LinePart = string | Uint8Array | number;

/** Line parts the raw line writer fills with a line's start: the level (and `,"time":` when the time is given),
 *  the time, pino's bindings. */
export const LINE_START_PARTS = 3;

/** True when `value` may be a number part. */
export const isNumberPart = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;

export interface LogDestination {
  write(chunk: string): unknown;
  flush?(callback?: (err?: Error | null) => void): unknown;
  /** write() of the parts joined, without joining them (see LinePart). */
  writeParts?(parts: readonly LinePart[]): unknown;
  /** Lines dropped since start because the destination's reader fell too far behind (log-destination.ts). */
  droppedLines?(): number;
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

/** pino's internals when nothing in the logger would change a line written around it (mixin, hooks, log
 *  formatter, nested key, serializer for `key`, msg prefix or another message key, a multistream needing
 *  metadata); undefined otherwise. */
function plainInternals(logger: Logger, key: string): PinoInternals | undefined {
  const internals = logger as unknown as PinoInternals;
  const stream = internals[S.streamSym] as (LogDestination & Record<symbol, unknown>) | undefined;
  const serializers = (internals[S.serializersSym] ?? {}) as Record<string, unknown>;
  const formatters = (internals[S.formattersSym] ?? {}) as { log?: unknown };
  const hooks = (internals[S.hooksSym] ?? {}) as { streamWrite?: unknown };
  const plain =
    stream !== undefined &&
    typeof stream.write === 'function' &&
    stream[S.needsMetadataGsym] !== true &&
    !internals[S.mixinSym] &&
    !internals[S.nestedKeySym] &&
    !(logger as { msgPrefix?: string }).msgPrefix &&
    formatters.log === undefined &&
    hooks.streamWrite === undefined &&
    !Object.hasOwn(serializers, key) &&
    internals[S.messageKeySym] === 'msg';
  return plain ? internals : undefined;
}

/** Writes lines given from the text after pino's own start of the line (see createRawLineWriter); at info
 *  unless a level is given. */
export interface RawLineWriter {
  /** `,"<key>":`, as pino writes it before a `key` field. */
  readonly fieldPrefix: string;
  /** `}` and the EOL, as pino ends a line after its message. */
  readonly end: string;
  write(body: string, level?: RawLineLevel, time?: number): void;
  /** True when the destination takes a line in parts; writeParts then skips making one string of it. */
  readonly takesParts: boolean;
  /** write(body) for the body in parts; the first LINE_START_PARTS of `parts` are overwritten with the line's start. */
  writeParts(parts: LinePart[], level?: RawLineLevel, time?: number): void;
  /** The clock the line's `time` is read from when none is given; undefined when not known. A caller that has
   *  just read this clock for the line's content passes that reading as `time` instead of a second read. */
  readonly clock: (() => number) | undefined;
}

/** The clock behind each timestamp function createLogger gives pino (children share their parent's). */
const lineClocks = new WeakMap<object, () => number>();

/**
 * `write(body)` writes exactly `{"level":30,"time":...<bindings>` + body to the logger's destination, as
 * pino would start an info line (`write(body, 'warn')`: `{"level":40,...`, as pino starts a warn line). The
 * caller checks that the level is enabled. Undefined when the logger uses a feature that would change the
 * line (see plainInternals).
 */
export function createRawLineWriter(logger: Logger, key: string): RawLineWriter | undefined {
  const internals = plainInternals(logger, key);
  if (internals === undefined) return undefined;
  const stream = internals[S.streamSym] as LogDestination;
  const cache = internals[S.lsCacheSym] as Record<number, string> | undefined;
  const info = cache?.[RAW_LINE_LEVELS.info];
  const warn = cache?.[RAW_LINE_LEVELS.warn];
  const error = cache?.[RAW_LINE_LEVELS.error];
  const time = internals[S.timeSym];
  const end = internals[S.endSym];
  if (typeof info !== 'string' || typeof warn !== 'string' || typeof error !== 'string') return undefined;
  if (typeof time !== 'function' || typeof end !== 'string' || typeof internals[S.chindingsSym] !== 'string') return undefined;
  const timeOf = time as () => string;
  // Bindings are read per line: setBindings() may change them after the writer was made.
  const clock = lineClocks.get(timeOf);
  const levelText = (level: RawLineLevel | undefined): string => (level === undefined || level === 'info' ? info : level === 'warn' ? warn : error);
  const start = (level: RawLineLevel | undefined, time: number | undefined): string =>
    `${levelText(level)}${time === undefined || clock === undefined ? timeOf() : `,"time":${time}`}${internals[S.chindingsSym] as string}`;
  const takesParts = typeof stream.writeParts === 'function';
  // A line's start in parts: each level's text with `,"time":` as bytes, made once; the time as a number part.
  const timedStarts = { info: Buffer.from(`${info},"time":`), warn: Buffer.from(`${warn},"time":`), error: Buffer.from(`${error},"time":`) };
  return {
    fieldPrefix: `,${JSON.stringify(key)}:`,
    end,
    write(body: string, level?: RawLineLevel, time?: number): void {
      stream.write(`${start(level, time)}${body}`);
    },
    takesParts,
    clock,
    writeParts(parts: LinePart[], level?: RawLineLevel, time?: number): void {
      if (time === undefined || clock === undefined) {
        parts[0] = levelText(level);
        parts[1] = timeOf();
      } else {
        parts[0] = timedStarts[level ?? 'info'];
        parts[1] = isNumberPart(time) ? time : `${time}`;
      }
      parts[2] = internals[S.chindingsSym] as string;
      if (takesParts) stream.writeParts?.(parts);
      else stream.write(joinParts(parts));
    },
  };
}

/** Each shorthand destination's underlying target, where its rendered lines go (for createShorthandAuditWriter). */
const shorthandTargets = new WeakMap<object, LogDestination>();

/**
 * In shorthand format, a writer for audit lines: exactly what `logger.info({ [AUDIT_TIME_KEY]: time }, msg)`
 * becomes once the shorthand destination has parsed pino's JSON back (`<RFC 3339 time> OCSF <msg>`),
 * without the JSON round trip. Undefined when the logger is not a plain one on a shorthand destination.
 */
export function createShorthandAuditWriter(logger: Logger): ((time: number, msg: string) => void) | undefined {
  const internals = plainInternals(logger, AUDIT_TIME_KEY);
  const stream = internals?.[S.streamSym] as object | undefined;
  const target = stream === undefined ? undefined : shorthandTargets.get(stream);
  if (target === undefined) return undefined;
  return function writeShorthandAudit(time: number, msg: string): void {
    target.write(`${new Date(time).toISOString()} OCSF ${msg}\n`);
  };
}

function shorthandDestination(target: LogDestination): LogDestination {
  const destination: LogDestination = {
    write(chunk: string) {
      // pino writes exactly one JSON line per call.
      return target.write(renderShorthandLine(chunk));
    },
    flush(callback) {
      if (target.flush === undefined) callback?.(null);
      else target.flush(callback);
    },
    droppedLines: () => target.droppedLines?.() ?? 0,
  };
  shorthandTargets.set(destination, target);
  return destination;
}

/**
 * A pino logger. `destination` defaults to asynchronous stdout (call `logger.flush()` before exit);
 * tests pass an in-memory stream. `now` (default Date.now) feeds pino's `time` so lines follow an injected clock.
 */
export function createLogger(options: {
  format: LogFormat;
  destination?: NodeJS.WritableStream | DestinationStream | LogDestination;
  level?: string;
  now?: () => number;
}): Logger {
  const base = (options.destination ?? createBufferedDestination(1, { onResume: (dropped) => reportDropped(logger, dropped) })) as LogDestination;
  const destination = options.format === 'shorthand' ? shorthandDestination(base) : base;
  const now = options.now ?? Date.now;
  // pino's own epoch timestamp when no clock is given, written the same way; remembered so a raw line writer knows its clock.
  const timestamp = (): string => `,"time":${now()}`;
  lineClocks.set(timestamp, now);
  const logger = pino(
    {
      level: options.level ?? 'info',
      base: null,
      redact: { paths: redactPaths(), censor: REDACT_CENSOR },
      timestamp,
    },
    destination as DestinationStream,
  );
  return logger;
}

function reportDropped(logger: Logger, dropped: number): void {
  logger.warn(
    { code: 'LOG_LINES_DROPPED' satisfies ErrorCode, dropped },
    `${dropped} log lines (audit events among them) were dropped: stdout's reader fell more than ${LOG_PENDING_MAX_BYTES / 1_048_576} MiB behind`,
  );
}

/** Lines the logger's destination has dropped since start (0 for a destination that never drops). */
export function logLinesDropped(logger: Logger): number {
  const stream = (logger as unknown as PinoInternals)[S.streamSym] as LogDestination | undefined;
  return stream?.droppedLines?.() ?? 0;
}
