// A first-key JSON origin for tests: python3's http.server reading each POST body with Debian's libcjson
// (cjson-origin.py), whose cJSON_GetObjectItemCaseSensitive returns the first of repeated keys, as C servers read
// them. `ran` lists what it read of each request (method, params.name, query), so a test proves what would have run.

import { join } from 'node:path';
import { type LoggedChild, spawnLogged } from './child-lines.js';

export interface CjsonRan {
  readonly path: string;
  readonly method: string | null;
  readonly tool: string | null;
  readonly query: string | null;
}

export interface CjsonOrigin {
  readonly port: number;
  /** One entry per POST the origin read, in order. */
  ran(): CjsonRan[];
  close(): Promise<void>;
}

const SCRIPT = join(import.meta.dirname, 'cjson-origin.py');
const RAN = 'RAN ';

/** Plain HTTP, or TLS with the PEM files given (a leaf the test issued). */
export async function cjsonOrigin(tls?: { readonly certFile: string; readonly keyFile: string }): Promise<CjsonOrigin> {
  const args = tls === undefined ? [] : ['--cert', tls.certFile, '--key', tls.keyFile];
  const child: LoggedChild = spawnLogged(['python3', SCRIPT, ...args], { label: 'cjson-origin' });
  const line = await child.waitForText((l) => l.startsWith('PORT '));
  return {
    port: Number(line.slice('PORT '.length)),
    ran: () => child.text.filter((l) => l.startsWith(RAN)).map((l) => JSON.parse(l.slice(RAN.length)) as CjsonRan),
    close: () => child.stop(),
  };
}
