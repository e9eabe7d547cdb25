// The JSON-format audit line of one event, written through a RawLineWriter: `,"ocsf":<OCSF JSON>,"msg":
// <shorthand>` after pino's line start. An event equal to an earlier one in everything but its time, uid and
// source port reuses that one's line, filled in; any other is rendered. Same bytes either way.
import { type AuditEventSnapshot, createAuditMemo } from './audit-memo.js';
import type { AuditEvent } from './event.js';
import { uidText } from './event-uid.js';
import { jsonNumber, jsonString } from './json-text.js';
import { isNumberPart, LINE_START_PARTS, type LinePart, type RawLineLevel, type RawLineWriter } from './logger.js';
import { DEFAULT_PRODUCT, type ProductInfo, toShorthand } from './ocsf.js';
import { createOcsfJsonRenderers, type OcsfHole } from './ocsf-json.js';

/**
 * A line with its time, uid and source port left open (OcsfJsonTemplate, plus the writer's field prefix
 * before and the message and line end after): `texts[0] + <holes[0]> + texts[1] + ...`. The uid holes'
 * quotes are in the texts around them. Made from an event's snapshot alone.
 */
interface LineTemplate {
  readonly holes: readonly OcsfHole[];
  /** The texts as UTF-8, when the destination takes parts and none of them starts or ends with a character
   *  beyond ASCII (parts must not split a surrogate pair; this is more than enough); else the texts. */
  readonly bytes: readonly Uint8Array[] | undefined;
  readonly texts: readonly string[] | undefined;
}

const isAsciiAt = (text: string, index: number): boolean => text.charCodeAt(index) < 0x80;

/** A hole's JSON text; the uid's text as it is (see createAuditLineWriter). */
function holeText(hole: OcsfHole, time: number, uid: Uint8Array, srcPort: unknown): string {
  return hole === 'time' ? jsonNumber(time) : hole === 'uid' ? uidText(uid) : jsonNumber(srcPort as number);
}

/** A number hole as a line part: the number itself where the destination writes its digits, else its JSON text. */
const numberPart = (value: unknown): LinePart => (isNumberPart(value) ? value : jsonNumber(value as number));

/**
 * `write(event, time, uid, level)` writes the event's line (at info when no level is given); `uid` must be the
 * text of a UUID as event-uid.ts or randomUUID() writes it (hex digits and dashes, which JSON writes as they are), as
 * ASCII bytes; they are copied before the call returns. Throws where the renderers throw.
 * `clock` is the one `time` was read from: when the writer times its lines by the same clock, the line's time is
 * that reading (the event's), not a second one.
 */
export function createAuditLineWriter(
  writer: RawLineWriter,
  product: ProductInfo | undefined,
  clock?: () => number,
): (event: AuditEvent, time: number, uid: Uint8Array, level?: RawLineLevel) => void {
  const sameClock = clock !== undefined && writer.clock === clock;
  const renderers = createOcsfJsonRenderers();
  const templates = createAuditMemo<LineTemplate>();
  const templateProduct = product ?? DEFAULT_PRODUCT;
  const { fieldPrefix, end } = writer;

  function makeTemplate(snapshot: AuditEventSnapshot): LineTemplate | undefined {
    const ocsf = renderers.template(snapshot, templateProduct);
    if (ocsf === undefined) return undefined;
    const { holes } = ocsf;
    const texts = [...ocsf.pieces];
    const last = texts.length - 1;
    texts[0] = `${fieldPrefix}${texts[0]}`;
    texts[last] = `${texts[last]},"msg":${jsonString(toShorthand(snapshot))}${end}`;
    for (let i = 0; i < holes.length; i++) {
      if (holes[i] !== 'uid') continue;
      texts[i] = `${texts[i]}"`;
      texts[i + 1] = `"${texts[i + 1]}`;
    }
    const asBytes = writer.takesParts && texts.every((text) => text.length > 0 && isAsciiAt(text, 0) && isAsciiAt(text, text.length - 1));
    const template: LineTemplate = asBytes ? { holes, bytes: texts.map((text) => Buffer.from(text)), texts: undefined } : { holes, bytes: undefined, texts };
    templates.remember(snapshot, template);
    return template;
  }

  function templateFor(event: AuditEvent): LineTemplate | undefined {
    const known = templates.find(event);
    if (known !== undefined) return known;
    const snapshot = templates.admit(event);
    return snapshot === undefined ? undefined : makeTemplate(snapshot);
  }

  return function writeAuditLine(event: AuditEvent, time: number, uid: Uint8Array, level?: RawLineLevel): void {
    const lineTime = sameClock ? time : undefined;
    const template = templateFor(event);
    if (template === undefined) {
      const meta = product === undefined ? { time, uid: uidText(uid) } : { time, uid: uidText(uid), product };
      writer.write(`${fieldPrefix}${renderers.render(event, meta)},"msg":${jsonString(toShorthand(event))}${end}`, level, lineTime);
      return;
    }
    const { texts, bytes, holes } = template;
    const srcPort = event.src?.port;
    if (bytes !== undefined) {
      // The first LINE_START_PARTS are the writer's: the line's start.
      // Sized once: one line per event, so no list grown by pushes.
      const parts = new Array<LinePart>(LINE_START_PARTS + 1 + 2 * holes.length);
      for (let i = 0; i < LINE_START_PARTS; i++) parts[i] = '';
      parts[LINE_START_PARTS] = bytes[0] as Uint8Array;
      for (let i = 0; i < holes.length; i++) {
        const hole = holes[i] as OcsfHole;
        parts[LINE_START_PARTS + 1 + 2 * i] = hole === 'uid' ? uid : numberPart(hole === 'time' ? time : srcPort);
        parts[LINE_START_PARTS + 2 + 2 * i] = bytes[i + 1] as Uint8Array;
      }
      writer.writeParts(parts, level, lineTime);
      return;
    }
    const strings = texts as readonly string[];
    let body = strings[0] as string;
    for (let i = 0; i < holes.length; i++) body += `${holeText(holes[i] as OcsfHole, time, uid, srcPort)}${strings[i + 1] as string}`;
    writer.write(body, level, lineTime);
  };
}
