// ResponseParser against the RegExp parser it replaced, byte by byte: every byte value in every templated
// position of the status line, headers, framing and chunked body, fed whole and split around that byte.

import { describe, it } from 'node:test';
import { agree, latin1 } from '../harness/h1-differential.js';

/** Inputs with one `@` each: every byte value is put there in turn. */
const TEMPLATES = [
  'HTTP/1.1 200 O@K\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200@OK\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.@ 200 OK\r\nContent-Length: 2\r\n\r\nok',
  '@TTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 2@4 No Content\r\n\r\n',
  'HTTP/1.1 @00 OK\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 10@ X\r\nUpgrade: y\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nX-@A: b\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\n@X-A: b\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nX-A@: b\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nX-A:@b\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nX-A: b@c\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nX-A: b@\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b@',
  'HTTP/1.1 200 OK\r\nContent-Length: 2@\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nContent-Length: @2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nContent-Length: 2,@2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nContent-Lengt@: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\n@ontent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunke@\r\n\r\n2\r\nok\r\n0\r\n\r\n',
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked,@\r\n\r\n2\r\nok\r\n0\r\n\r\n',
  'HTTP/1.1 200 OK\r\nTransfer-Encodin@: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n',
  'HTTP/1.1 200 OK\r\nConnection: clos@\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nConnection: keep-alive,@close\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nConnectio@: close\r\nContent-Length: 2\r\n\r\nok',
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a=@\r\nok\r\n0\r\n\r\n',
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2@\r\nok\r\n0\r\n\r\n',
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T@: 1\r\n\r\n',
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1@\r\n\r\n',
  'HTTP/1.1 100 Continue\r\nX@: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
];

describe('ResponseParser against the RegExp parser it replaced', () => {
  it('agrees for every byte value in every templated position, whole and split around it', () => {
    for (const template of TEMPLATES) {
      const at = template.indexOf('@');
      for (let c = 0; c < 256; c++) {
        const input = latin1(template.replace('@', String.fromCharCode(c)));
        agree(input);
        agree(input, [at], false, false);
        agree(input, [at + 1]);
      }
    }
  });
});
