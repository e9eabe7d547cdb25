// The default log destination keeps a timer only while lines are pending: an idle boundary is never woken by its
// audit log. In a real child process per kind of stdout (pipe: written from the loop; file; /dev/null: through the
// thread pool), with the log's timers counted by spyLogTimers().
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, mkdtempSync, openSync, rmSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { createBufferedDestination, writeMode } from '../../src/telemetry/log-destination.js';
import { assertNumbered, EVENT, runChildResult } from '../harness/log-child.js';
import { spyLogTimers } from '../harness/log-timers.js';

const LOG_TIMERS = fileURLToPath(new URL('../harness/log-timers.ts', import.meta.url));
const SPY = `const timers = (await import(${JSON.stringify(LOG_TIMERS)})).spyLogTimers();`;

/** The child's report on stderr: `timers {...}`. */
function report(stderr: string): Record<string, number> | undefined {
  const match = /^timers (\{.*\})$/m.exec(stderr);
  return match === null ? undefined : (JSON.parse(match[1] as string) as Record<string, number>);
}

for (const stdout of ['pipe', 'file', 'null'] as const) describe(`the default stdout log destination's timer, stdout ${stdout === 'null' ? '/dev/null' : `a ${stdout}`}`, () => {
  it('arms none while idle, one for a lone line, which reaches stdout with no flush, and none once it is out', async () => {
    const result = await runChildResult(
      `
      // Keeps the child alive (the log's timer does not): the parent ends it. Only that timer can write the line.
      setInterval(() => {}, 1000);
      const idle = timers.live();
      sink.emit((() => { const i = 0; return ${EVENT}; })());
      const pending = timers.live();
      await timers.nextFire();
      process.stderr.write('timers ' + JSON.stringify({ idle, pending, out: timers.live() }) + '\\n');
    `,
      { before: SPY, stdout, until: (lines, stderr) => report(stderr) !== undefined && (stdout === 'null' || lines.length >= 1) },
    );
    assert.deepEqual(report(result.stderr), { idle: 0, pending: 1, out: 0 }, result.stderr);
    if (stdout !== 'null') assertNumbered(result.lines, 1);
  });

  it('keeps one timer for many pending batches, and none once a flush has handed them over', async () => {
    const result = await runChildResult(
      `
      for (let i = 0; i < 3000; i++) sink.emit(${EVENT});
      const busy = timers.live();
      logger.flush(() => {
        process.stderr.write('timers ' + JSON.stringify({ busy, flushed: timers.live() }) + '\\n');
        process.exit(0);
      });
    `,
      { before: SPY, stdout },
    );
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(report(result.stderr), { busy: 1, flushed: 0 }, result.stderr);
    if (stdout !== 'null') assertNumbered(result.lines, 3000);
  });
});

describe("the buffered destination's timer on a pipe written through the thread pool", () => {
  it('hands a lone line over with no flush, and keeps no timer once it is out', async (t) => {
    const timers = spyLogTimers();
    t.after(() => timers.restore());
    const dir = mkdtempSync(join(tmpdir(), 'boundary-log-idle-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    // O_RDWR opens without a reader; the reader then reads from the event loop (a socket on the fd), not the pool.
    const fd = openSync(fifo, 'r+');
    t.after(() => closeSync(fd));
    const reader = new Socket({ fd: openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK), writable: false });
    t.after(() => reader.destroy());
    assert.equal(writeMode(fd), 'pool');
    const destination = createBufferedDestination(fd);
    assert.equal(timers.live(), 0);
    destination.write('{"n":0}\n');
    assert.equal(timers.live(), 1);
    const [chunk] = (await once(reader, 'data')) as [Buffer];
    assert.equal(chunk.toString(), '{"n":0}\n');
    assert.equal(timers.live(), 0);
  });
});
