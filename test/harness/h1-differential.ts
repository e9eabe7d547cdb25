// Differential harness for the response parser: runs ResponseParser and the reference parser it replaced over
// the same input, cut into the same pieces, and asserts that heads, body, ends, reuse and errors all agree.

import assert from 'node:assert/strict';
import type { BoundaryError } from '../../src/shared/errors.js';
import { ResponseParser, type ResponseSink } from '../../src/http1/h1-response.js';
import { ReferenceParser } from './h1-reference-parser.js';

interface Outcome {
  heads: [number, string[]][];
  body: string;
  ends: number;
  reusable: boolean;
  done: boolean;
  error: string | undefined;
}

interface Parser {
  start(isHead: boolean): void;
  feed(buf: Buffer): BoundaryError | undefined;
  eof(): BoundaryError | undefined;
  readonly reusable: boolean;
  readonly done: boolean;
}

/** Feeds `input` cut at `cuts` (ascending offsets); `eof` then reports the upstream's close. */
function run(make: (sink: ResponseSink) => Parser, input: Buffer, cuts: readonly number[], isHead: boolean, eof: boolean): Outcome {
  const out: Outcome = { heads: [], body: '', ends: 0, reusable: false, done: false, error: undefined };
  const body: Buffer[] = [];
  const parser = make({
    onHead: (status, headers) => out.heads.push([status, headers]),
    onData: (chunk) => body.push(Buffer.from(chunk)),
    onEnd: () => out.ends++,
  });
  parser.start(isHead);
  let error: BoundaryError | undefined;
  let from = 0;
  for (const cut of [...cuts, input.length]) {
    if (cut <= from) continue;
    error = parser.feed(input.subarray(from, cut));
    from = cut;
    if (error !== undefined) break;
  }
  if (error === undefined && eof) error = parser.eof();
  out.body = Buffer.concat(body).toString('latin1');
  out.reusable = parser.reusable;
  out.done = parser.done;
  out.error = error === undefined ? undefined : `${error.code}: ${error.message}`;
  return out;
}

/** Asserts that both parsers agree on `input` cut at `cuts`, for a HEAD request or not, with or without an upstream close. */
export function agree(input: Buffer, cuts: readonly number[] = [], isHead = false, eof = true): void {
  const expected = run((sink) => new ReferenceParser(sink), input, cuts, isHead, eof);
  const actual = run((sink) => new ResponseParser(sink), input, cuts, isHead, eof);
  assert.deepEqual(actual, expected, `${JSON.stringify(input.toString('latin1').slice(0, 300))} cut at ${cuts.join(',')} head=${isHead} eof=${eof}`);
}

/** One byte per character, so every byte value survives into the input. */
export function latin1(text: string): Buffer {
  return Buffer.from(text, 'latin1');
}
