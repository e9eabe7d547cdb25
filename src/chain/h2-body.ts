// The request body of an HTTP/2 stream on its way upstream, for bodies framed as gRPC (or Connect streaming)
// messages: the marker scan of credential-injection.ts scannedBody, run per message and released at each message's
// end, so a streaming call never waits on a held tail (docs/credentials.md#streaming-bodies).

import { createMarkerScanner } from '../credentials/scan.js';
import { createEnvelopeSplitter } from '../http2/grpc.js';
import { MarkerInBodyError } from './credential-injection.js';

/**
 * Every byte released by a marker scanner only; a message boundary releases the held tail, since no field of one
 * message runs into the next. A marker stops the body before any of its bytes go upstream.
 */
export async function* scannedMessages(body: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const splitter = createEnvelopeSplitter();
  let scanner = createMarkerScanner();
  for await (const chunk of body) {
    const out: Buffer[] = [];
    for (const piece of splitter.split(chunk)) {
      if (scanner.feed(piece.bytes) === 'marker') throw new MarkerInBodyError();
      if (!piece.ends) {
        const released = scanner.release();
        if (released.length > 0) out.push(released);
        continue;
      }
      const flushed = scanner.flush();
      if (flushed.length > 0) out.push(flushed);
      scanner = createMarkerScanner();
    }
    if (out.length === 1) yield out[0] as Buffer;
    else if (out.length > 1) yield Buffer.concat(out);
  }
  const rest = scanner.flush();
  if (rest.length > 0) yield rest;
}
