// The TAP reporter of `npm test`, plus a list of every failed, cancelled or timed-out test with its file and
// first error line, printed after node:test's summary. CI keeps only the tail of a long run, and a file killed
// at --test-timeout leaves nothing else there that says which file it was. Plain JavaScript: node:test loads
// reporters before tsx's loader is registered.

import { tap } from 'node:test/reporters';

/** A suite whose only failure is its children's adds nothing: they are listed themselves. */
const ECHO_FAILURES = new Set(['subtestsFailed']);
const MAX_ERROR_CHARS = 300;

/** @param {{ cause?: unknown, message?: string } | undefined} error */
function firstLine(error) {
  const cause = error?.cause;
  const text = cause instanceof Error ? cause.message : typeof cause === 'string' ? cause : (error?.message ?? '');
  return (text.split('\n').find((line) => line.trim() !== '') ?? '').slice(0, MAX_ERROR_CHARS);
}

/** @param {AsyncIterable<{ type: string, data: any }>} source */
export default async function* failuresReporter(source) {
  /** @type {string[]} */
  const failures = [];
  async function* observe() {
    for await (const event of source) {
      if (event.type === 'test:fail') {
        const { name, file, details } = event.data;
        const kind = details.error?.failureType ?? 'failed';
        if (!ECHO_FAILURES.has(kind)) failures.push(`${file ?? '?'} :: ${name} [${kind}, ${Math.round(details.duration_ms)} ms] ${firstLine(details.error)}`);
      }
      yield event;
    }
  }
  yield* tap(observe());
  if (failures.length > 0) yield `# not passed (${failures.length}):\n${failures.map((line) => `#   ${line}\n`).join('')}`;
}
