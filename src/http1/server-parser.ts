// The request parser of boundary's HTTP/1.1 server: node:http's own llhttp binding, initialised as node:http does
// (strict, never a lenient flag; the head limit in the binding), and how it reads a socket: straight from a plain TCP
// socket's native handle as node:http does, or from 'data' events where there is no such handle (TLS in tunnels).

import { createRequire } from 'node:module';
import type { Socket } from 'node:net';

export interface LlhttpParser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  execute(data: Buffer): number | Error;
  finish(): number | Error | undefined;
  consume(handle: unknown): void;
  unconsume(): void;
  getCurrentBuffer(): Buffer;
  /** Deletes the native parser, which until then holds this object, and its callbacks, from a global handle. */
  close(): void;
  [key: number]: unknown;
}

interface LlhttpModule {
  readonly HTTPParser: { new (): LlhttpParser; readonly REQUEST: number; readonly kLenientNone: number } & Record<string, number>;
  readonly methods: readonly string[];
}

const { HTTPParser, methods } = createRequire(import.meta.url)('_http_common') as LlhttpModule;
/** llhttp's method numbers to names. */
export const METHODS = methods;
/** The binding's callback slots. */
export const ON = HTTPParser as unknown as Record<'kOnMessageBegin' | 'kOnHeaders' | 'kOnHeadersComplete' | 'kOnBody' | 'kOnMessageComplete' | 'kOnExecute', number>;

/** A strict request parser with `maxHeadBytes` as llhttp's head limit (HPE_HEADER_OVERFLOW beyond it). */
export function requestParser(maxHeadBytes: number): LlhttpParser {
  const parser = new HTTPParser();
  parser.initialize(HTTPParser.REQUEST, {}, maxHeadBytes, HTTPParser.kLenientNone);
  return parser;
}

function closeParser(parser: LlhttpParser): void {
  parser.close();
}

/**
 * A parser that reads no more is deleted, as node:http deletes the parsers it does not pool: never left to the
 * collector, which cannot take it while the native side holds it. On a later turn, so that no call into the parser
 * (an execute whose callback let the connection go) is still on the stack.
 */
export function discardParser(parser: LlhttpParser): void {
  setImmediate(closeParser, parser);
}

/** Feeds a socket to a parser; `onResult` gets each execute's result and the bytes it read (for an upgrade's rest). */
export interface SocketFeed {
  pause(): void;
  resume(): void;
  /** The parser reads no more; the socket is left as a plain stream. */
  stop(): void;
}

interface StreamHandle {
  readonly isStreamBase?: boolean;
  reading?: boolean;
  readStart(): number;
  readStop(): number;
}

export function feedSocket(socket: Socket, parser: LlhttpParser, onResult: (ret: number | Error, data: () => Buffer) => void): SocketFeed {
  const handle = (socket as Socket & { _handle?: StreamHandle | null; encrypted?: boolean })._handle;
  // Bytes already buffered on the socket (a tunnel's sniffed bytes put back) must come first: 'data' events then.
  const native = handle?.isStreamBase === true && (socket as { encrypted?: boolean }).encrypted !== true && socket.readableLength === 0;
  if (native) {
    parser.consume(handle);
    const current = (): Buffer => parser.getCurrentBuffer();
    parser[ON.kOnExecute] = (ret: number | Error) => onResult(ret, current);
    // Flowing, as under node:http: the client's FIN is seen ('end'), and bytes left after stop() are read and dropped.
    socket.resume();
    let consumed = true;
    return {
      pause() {
        if (!consumed || handle.reading === false) return;
        handle.reading = false;
        handle.readStop();
      },
      resume() {
        if (!consumed || handle.reading === true || socket.destroyed) return;
        handle.reading = true;
        handle.readStart();
      },
      stop() {
        if (!consumed) return;
        consumed = false;
        parser.unconsume();
        if (handle.reading === false && !socket.destroyed) {
          handle.reading = true;
          handle.readStart();
        }
      },
    };
  }
  const onData = (chunk: Buffer): void => onResult(parser.execute(chunk), () => chunk);
  socket.on('data', onData);
  return {
    pause: () => socket.pause(),
    resume: () => socket.resume(),
    stop: () => socket.removeListener('data', onData),
  };
}
