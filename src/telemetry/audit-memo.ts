// A bounded memo keyed on every AuditEvent field the renderers read, except the source port: an event equal
// in all of them to an earlier one finds what was made from that one. Pure data structure, no rendering.
import type { AuditEvent } from './event.js';

/** Entries kept at most; the memo is emptied when full. */
export const MAX_AUDIT_MEMO_ENTRIES = 256;
/** Events whose message (the map key) is longer are not memoised. */
export const MAX_AUDIT_MEMO_KEY_CHARS = 512;
/** Events whose `unmapped`, or an object or list in it, holds more keys or items are not memoised. */
export const MAX_AUDIT_MEMO_UNMAPPED_KEYS = 16;
/** Entries per message: events that differ only where the message does not show (the status code...). */
const MAX_AUDIT_MEMO_ENTRIES_PER_KEY = 4;
/** Events whose strings (field values, unmapped keys and values) add up to more are not memoised: with the
 *  entry bound, this bounds the memo's memory (its values are made from these strings). */
export const MAX_AUDIT_MEMO_EVENT_CHARS = 4_096;

type Primitive = string | number | boolean | null | undefined;

/** `unmapped`, or a plain object in it (a denial's `replay`), as read once: its own keys in order and their values;
 *  in `unmapped`, a primitive or such an object; in an object in it, a primitive or a list of strings. */
interface ObjectSnapshot {
  readonly keys: readonly string[];
  readonly values: readonly (Primitive | readonly string[] | ObjectSnapshot)[];
}

/** Object.prototype.hasOwnProperty: called on a for-in's own key, V8 answers it without a lookup (Object.hasOwn it
 *  does not), and matches() asks it for every key of every event's `unmapped`. */
const ownProperty = Object.prototype.hasOwnProperty;

/**
 * An event's fields as read once, with `unmapped` cut down to own keys with primitive values or plain objects of
 * them (and of lists of strings), one level deep: a plain AuditEvent the renderers read exactly as they read the
 * event it was taken from. `src.port` is kept but not
 * compared (only whether there is one): renderers leave it open.
 */
export interface AuditEventSnapshot extends AuditEvent {
  readonly unmappedRead: ObjectSnapshot | undefined;
}

interface Entry<T> {
  readonly snapshot: AuditEventSnapshot;
  readonly value: T;
}

interface AuditMemo<T> {
  /** What was remembered for an event equal to this one in every field but src.port; undefined if none. */
  find(event: AuditEvent): T | undefined;
  /** After find() found nothing: the event's snapshot, to make and remember a value from, when its message
   *  was seen before since the memo was last emptied; undefined when it was not (it is now), or when the
   *  event is not memoised (see the limits above). Events seen once (a new path each time) cost no more. */
  admit(event: AuditEvent): AuditEventSnapshot | undefined;
  /** Remembers `value`, made from `snapshot` alone. */
  remember(snapshot: AuditEventSnapshot, value: T): void;
}

const isOptionalString = (value: unknown): value is string | undefined => value === undefined || typeof value === 'string';
const isOptionalNumber = (value: unknown): value is number | undefined => value === undefined || typeof value === 'number';
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

function isPrimitive(value: unknown): value is Primitive {
  return value === null || value === undefined || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
}

/** An object made by a literal (or with no prototype): its own keys are all JSON.stringify reads of it. */
function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (!isObject(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function isStringList(value: unknown): value is readonly string[] {
  if (!Array.isArray(value) || Object.getPrototypeOf(value) !== Array.prototype || value.length > MAX_AUDIT_MEMO_UNMAPPED_KEYS) return false;
  for (let i = 0; i < value.length; i++) if (typeof value[i] !== 'string') return false;
  return true;
}

/**
 * `object`'s own keys and values (`depth` 0: `unmapped`; 1: an object in it), with its copy for the snapshot (no
 * prototype, lists copied) and the length of its strings; undefined when it holds anything else, or too many keys.
 */
function takeObject(object: Record<string, unknown>, depth: 0 | 1): { readonly read: ObjectSnapshot; readonly copy: Record<string, unknown>; readonly chars: number } | undefined {
  const keys: string[] = [];
  const values: ObjectSnapshot['values'][number][] = [];
  // No prototype, and no `__proto__` key: every assignment makes an own key, in the same order.
  const copy = Object.create(null) as Record<string, unknown>;
  let chars = 0;
  for (const key in object) {
    if (!ownProperty.call(object, key)) continue;
    const value = object[key];
    if (keys.length >= MAX_AUDIT_MEMO_UNMAPPED_KEYS || key === '__proto__') return undefined;
    chars += key.length;
    if (isPrimitive(value)) {
      chars += typeof value === 'string' ? value.length : 0;
      values.push(value);
      copy[key] = value;
    } else if (depth === 1 && isStringList(value)) {
      const list = value.slice();
      chars += textLength(list);
      values.push(list);
      copy[key] = list;
    } else {
      const nested = depth === 0 && isPlainObject(value) ? takeObject(value, 1) : undefined;
      if (nested === undefined) return undefined;
      chars += nested.chars;
      values.push(nested.read);
      copy[key] = nested.copy;
    }
    keys.push(key);
  }
  return { read: { keys, values }, copy, chars };
}

/** Equal to what `read` was read from: own keys in order, their values by identity, lists item by item, objects
 *  (plain ones) the same way. */
function matchesObject(read: ObjectSnapshot, object: Record<string, unknown>): boolean {
  const { keys, values } = read;
  let i = 0;
  for (const key in object) {
    if (!ownProperty.call(object, key)) continue;
    if (i >= keys.length || key !== keys[i]) return false;
    const expected = values[i];
    const got = object[key];
    if (Array.isArray(expected)) {
      if (!Array.isArray(got) || got.length !== expected.length) return false;
      for (let j = 0; j < expected.length; j++) if (got[j] !== expected[j]) return false;
    } else if (isObject(expected)) {
      if (!isPlainObject(got) || !matchesObject(expected as ObjectSnapshot, got)) return false;
    } else if (got !== expected) return false;
    i++;
  }
  return i === keys.length;
}

/** The summed length of the strings among `values` (other values count 0). */
function textLength(values: readonly unknown[]): number {
  let n = 0;
  for (const value of values) if (typeof value === 'string') n += value.length;
  return n;
}

function takeSnapshot(event: AuditEvent): AuditEventSnapshot | undefined {
  if (!isObject(event)) return undefined;
  const { class: cls, activity, severity, message, action, engine, policy, statusDetail, policyHash, generation, dst, src, http, unmapped } = event;
  // Snapshots hold the detail under its one name, whichever name the emitter used.
  const detail = event.detail;
  if (typeof cls !== 'string' || typeof activity !== 'string' || typeof severity !== 'string' || typeof message !== 'string') return undefined;
  if (message.length > MAX_AUDIT_MEMO_KEY_CHARS) return undefined;
  if (!isOptionalString(action) || !isOptionalString(engine) || !isOptionalString(policy) || !isOptionalString(statusDetail)) return undefined;
  if (!isOptionalString(detail) || !isOptionalString(policyHash) || !isOptionalNumber(generation)) return undefined;
  let dstCopy: AuditEvent['dst'];
  if (dst !== undefined) {
    if (!isObject(dst) || !isOptionalString(dst.host) || !isOptionalString(dst.ip) || !isOptionalNumber(dst.port)) return undefined;
    dstCopy = { host: dst.host, ip: dst.ip, port: dst.port } as AuditEvent['dst'];
  }
  let srcCopy: AuditEvent['src'];
  if (src !== undefined) {
    if (!isObject(src) || !isOptionalString(src.ip) || !isOptionalNumber(src.port)) return undefined;
    srcCopy = { ip: src.ip, port: src.port } as AuditEvent['src'];
  }
  let httpCopy: AuditEvent['http'];
  if (http !== undefined) {
    if (!isObject(http) || typeof http.method !== 'string' || typeof http.url !== 'string') return undefined;
    httpCopy = { method: http.method, url: http.url };
  }
  let chars = textLength([cls, activity, severity, message, action, engine, policy, statusDetail, detail, policyHash]);
  chars += textLength([dstCopy?.host, dstCopy?.ip, srcCopy?.ip, httpCopy?.method, httpCopy?.url]);
  let unmappedRead: ObjectSnapshot | undefined;
  let unmappedCopy: Record<string, unknown> | undefined;
  if (unmapped !== undefined) {
    if (!isObject(unmapped) || Array.isArray(unmapped)) return undefined;
    const taken = takeObject(unmapped, 0);
    if (taken === undefined) return undefined;
    chars += taken.chars;
    unmappedRead = taken.read;
    unmappedCopy = taken.copy;
  }
  if (chars > MAX_AUDIT_MEMO_EVENT_CHARS) return undefined;
  // Only keys the event has: a renderer that asks `!== undefined` sees the same either way, and so does one
  // that asks `in`.
  const copy: Record<string, unknown> = { class: cls, activity, severity, message, unmappedRead };
  if (action !== undefined) copy.action = action;
  if (engine !== undefined) copy.engine = engine;
  if (policy !== undefined) copy.policy = policy;
  if (statusDetail !== undefined) copy.statusDetail = statusDetail;
  if (detail !== undefined) copy.detail = detail;
  if (policyHash !== undefined) copy.policyHash = policyHash;
  if (generation !== undefined) copy.generation = generation;
  if (dstCopy !== undefined) copy.dst = dstCopy;
  if (srcCopy !== undefined) copy.src = srcCopy;
  if (httpCopy !== undefined) copy.http = httpCopy;
  if (unmappedCopy !== undefined) copy.unmapped = unmappedCopy;
  return copy as unknown as AuditEventSnapshot;
}

/** Equal in every field a renderer reads but src.port (only its presence); `message` is compared by the map. */
function matches(s: AuditEventSnapshot, e: AuditEvent): boolean {
  if (
    e.class !== s.class ||
    e.activity !== s.activity ||
    e.severity !== s.severity ||
    e.action !== s.action ||
    e.engine !== s.engine ||
    e.policy !== s.policy ||
    e.statusDetail !== s.statusDetail ||
    e.detail !== s.detail ||
    e.generation !== s.generation ||
    e.policyHash !== s.policyHash
  ) {
    return false;
  }
  const dst = e.dst;
  const sdst = s.dst;
  if (sdst === undefined ? dst !== undefined : !isObject(dst) || dst.host !== sdst.host || dst.ip !== sdst.ip || dst.port !== sdst.port) return false;
  const src = e.src;
  const ssrc = s.src;
  if (ssrc === undefined) {
    if (src !== undefined) return false;
  } else if (!isObject(src) || src.ip !== ssrc.ip || (ssrc.port === undefined ? src.port !== undefined : typeof src.port !== 'number')) {
    return false;
  }
  const http = e.http;
  const shttp = s.http;
  if (shttp === undefined ? http !== undefined : !isObject(http) || http.method !== shttp.method || http.url !== shttp.url) return false;
  const unmapped = e.unmapped;
  if (s.unmappedRead === undefined) return unmapped === undefined;
  if (!isObject(unmapped) || Array.isArray(unmapped)) return false;
  return matchesObject(s.unmappedRead, unmapped);
}

/** Slots of the table of messages seen once (a power of two). */
const SEEN_SLOTS = 256;

/** A slot for the message from its length and two of its characters: events that differ, differ there
 *  mostly (the path's end, the host). A collision only delays a template. */
function seenSlot(message: string): number {
  const length = message.length;
  return (length * 31 + message.charCodeAt(length - 1) * 7 + message.charCodeAt(length >> 1)) & (SEEN_SLOTS - 1);
}

export function createAuditMemo<T>(): AuditMemo<T> {
  const byMessage = new Map<string, Entry<T>[]>();
  let size = 0;
  // Messages seen once, one per slot: no map entry (and no garbage) for an event that never comes again.
  const seen: (string | undefined)[] = new Array<string | undefined>(SEEN_SLOTS).fill(undefined);

  function makeRoom(): void {
    if (size < MAX_AUDIT_MEMO_ENTRIES) return;
    byMessage.clear();
    size = 0;
  }

  return {
    find(event: AuditEvent): T | undefined {
      const message = event.message;
      if (typeof message !== 'string' || message.length > MAX_AUDIT_MEMO_KEY_CHARS) return undefined;
      const entries = byMessage.get(message);
      if (entries === undefined) return undefined;
      for (let i = 0; i < entries.length; i++) {
        const entry = entries[i] as Entry<T>;
        if (matches(entry.snapshot, event)) return entry.value;
      }
      return undefined;
    },
    admit(event: AuditEvent): AuditEventSnapshot | undefined {
      const message = event.message;
      if (typeof message !== 'string' || message.length > MAX_AUDIT_MEMO_KEY_CHARS) return undefined;
      const slot = seenSlot(message);
      if (seen[slot] === message) {
        seen[slot] = undefined;
        return takeSnapshot(event);
      }
      seen[slot] = message;
      return undefined;
    },
    remember(snapshot: AuditEventSnapshot, value: T): void {
      makeRoom();
      const entries = byMessage.get(snapshot.message);
      const entry = { snapshot, value };
      if (entries === undefined) byMessage.set(snapshot.message, [entry]);
      else if (entries.length < MAX_AUDIT_MEMO_ENTRIES_PER_KEY) entries.push(entry);
      else {
        // The oldest goes: a key with more shapes than this keeps the latest ones.
        entries.shift();
        entries.push(entry);
        return;
      }
      size++;
    },
  };
}
