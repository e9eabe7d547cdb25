// An HTTP/2 stream's request as the request chain reads it (h2-stream.ts drives it): the head in the
// flat form HTTP/1.1 requests have, fields by name built only when a held body's checks ask, and the stream as body.

import type { IncomingHttpHeaders } from 'node:http';
import type { H2RequestHead } from '../http2/request-head.js';
import type { RequestStream } from '../http2/request-stream.js';

/** The stream's request as the chain reads it; its body is the stream itself. */
export class H2StreamRequest {
  readonly httpVersion: string;
  readonly url: string;
  readonly rawHeaders: readonly string[];
  readonly stream: RequestStream;
  private fieldsByName: IncomingHttpHeaders | undefined = undefined;

  constructor(head: H2RequestHead, stream: RequestStream) {
    this.httpVersion = head.httpVersion;
    this.url = head.url;
    this.rawHeaders = head.rawHeaders;
    this.stream = stream;
  }

  /** The fields by name, as a held body's checks read them; built only for a request whose body is held. */
  get headers(): IncomingHttpHeaders {
    if (this.fieldsByName === undefined) {
      const byName: Record<string, string> = {};
      const raw = this.rawHeaders;
      for (let i = 0; i < raw.length; i += 2) {
        const name = raw[i] as string;
        const known = byName[name];
        byName[name] = known === undefined ? (raw[i + 1] as string) : `${known}, ${raw[i + 1] as string}`;
      }
      this.fieldsByName = byName;
    }
    return this.fieldsByName;
  }

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return this.stream;
  }
}

/** The `:method` of a head that failed its checks, for its event (printable ASCII only, as the event may show it). */
export function methodOf(fields: readonly string[]): string {
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i] === ':method') return /^[!-~]{1,32}$/.test(fields[i + 1] ?? '') ? (fields[i + 1] as string) : 'UNKNOWN';
  }
  return 'UNKNOWN';
}
