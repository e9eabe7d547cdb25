// The default log destination (batched stdout, src/telemetry/log-destination.ts) in a real child process, its
// stdout a pipe or a file: lines reach it on flush() and on the flush timer when nothing else happens; on a pipe,
// from the event loop, past a reader that stops reading (up to a bound), and past a reader that goes away. (Exit:
// test/regressions/issue-33-log-lines-at-exit.test.ts.)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { LOG_PENDING_MAX_BYTES, LOG_SLAB_BYTES, LOG_STREAM_BATCH_BYTES } from '../../src/telemetry/log-destination.js';
import { assertNumbered, EVENT, runChild, runChildResult } from '../harness/log-child.js';

/** A line longer than a slab. */
const BIG_CHARS = LOG_SLAB_BYTES + 50_000;

/** An event that repeats but for its source port (so its line comes from a template), with `text` in its path. */
function repeatingEvent(text: string): string {
  return `{ class: 'HTTP', activity: 'GET', severity: 'INFO', action: 'ALLOWED', engine: 'policy', policy: 'p',
    dst: { host: 'origin.example.test', port: 8080 }, src: { ip: '127.0.0.1', port: 40000 + i },
    http: { method: 'GET', url: 'http://origin.example.test:8080/${text}' }, message: 'FORWARD allowed GET origin.example.test:8080/${text}',
    reason: 'r', unmapped: { adapter: 'forward', status_code: 200 } }`;
}

for (const stdout of ['pipe', 'file'] as const) describe(`the default stdout log destination, stdout a ${stdout}`, () => {
  it('writes lines made from templates byte for byte as rendered ones, ASCII and not', async () => {
    const lines = await runChild(`
      for (let i = 0; i < 2000; i++) sink.emit(i % 2 === 0 ? ${repeatingEvent('ascii')} : ${repeatingEvent('é😀')});
      logger.flush(() => process.exit(0));
    `, { stdout });
    assert.equal(lines.length, 2000);
    const { toOcsf, toShorthand } = await import('../../src/telemetry/ocsf.js');
    lines.forEach((line, i) => {
      const event = new Function('i', `return ${i % 2 === 0 ? repeatingEvent('ascii') : repeatingEvent('é😀')};`)(i);
      const uid = (JSON.parse(line) as { ocsf: { metadata: { uid: string } } }).ocsf.metadata.uid;
      const expected = `{"level":30,"time":${(JSON.parse(line) as { time: number }).time},"ocsf":${JSON.stringify(toOcsf(event, { time: 1767225600000, uid }))},"msg":${JSON.stringify(toShorthand(event))}}`;
      assert.equal(line, expected, `line ${i}`);
    });
  });

  it('writes every line, in order, before logger.flush() calls back', async () => {
    const lines = await runChild(`
      for (let i = 0; i < 3000; i++) sink.emit(${EVENT});
      logger.flush(() => process.exit(0));
    `, { stdout });
    assertNumbered(lines, 3000);
  });

  it('writes a line on its own within the flush interval when no more traffic comes', async () => {
    const lines = await runChild(
      `
      for (let i = 0; i < 3; i++) sink.emit(${EVENT});
      // Keeps the child alive so only the flush timer can write the lines; the parent waits on them (until).
      setInterval(() => {}, 1000);
    `,
      { until: (seen) => seen.length >= 3, stdout },
    );
    assertNumbered(lines, 3);
  });

  it('keeps lines longer than a slab in order with the lines around them', async () => {
    const lines = await runChild(`
      for (let i = 0; i < 5; i++) sink.emit(${EVENT});
      logger.info({ n: 5, big: 'y'.repeat(${BIG_CHARS}) }, 'a line longer than a slab');
      sink.emit((() => { const i = 6; return ${EVENT}; })());
      logger.flush(() => process.exit(0));
    `, { stdout });
    assert.equal(lines.length, 7);
    assert.equal((JSON.parse(lines[5] ?? '') as { big: string }).big.length, BIG_CHARS);
    assert.equal((JSON.parse(lines[6] ?? '') as { ocsf: { unmapped: { n: number } } }).ocsf.unmapped.n, 6);
  });
});

describe('the default stdout log destination, stdout a pipe', () => {
  it('writes from the event loop: lines arrive while the only thread-pool thread is blocked', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'boundary-log-pool-'));
    try {
      const fifo = join(dir, 'fifo');
      execFileSync('mkfifo', [fifo]);
      // The pool's one thread waits on a FIFO nobody writes; a write through the pool would wait behind it, and
      // the child would be ended by the guard with no line out.
      const lines = await runChild(
        `
        const { openSync, read } = await import('node:fs');
        read(openSync(${JSON.stringify(fifo)}, 'r+'), Buffer.alloc(1), 0, 1, null, () => {});
        for (let i = 0; i < 200; i++) sink.emit(${EVENT});
      `,
        { until: (seen) => seen.length >= 200, env: { UV_THREADPOOL_SIZE: '1' } },
      );
      assertNumbered(lines, 200);
      assert.ok(200 * 500 > 2 * LOG_STREAM_BATCH_BYTES, 'the lines span several batches');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('goes on while the reader stops reading, then writes every line in order', async () => {
    // The parent reads nothing until the child, past 2 MB of lines (far more than a pipe holds), shows its event
    // loop still turns; a write that waited for the reader would never get there.
    const lines = await runChild(
      `
      for (let i = 0; i < 4000; i++) sink.emit(${EVENT});
      setTimeout(() => {
        process.stderr.write('turned\\n');
        logger.flush(() => process.exit(0));
      }, 0);
    `,
      {
        paused: true,
        onStderr: (child, text) => {
          if (text.includes('turned')) child.stdout?.resume();
        },
      },
    );
    assertNumbered(lines, 4000);
  });

  it('drops and counts lines past LOG_PENDING_MAX_BYTES behind a stopped reader, then says how many once it catches up', async () => {
    // Every line is made in one turn of the loop, so none is written before the bound: exactly the lines handed over
    // up to it arrive, every later one is dropped until the reader has caught up, and then lines flow again.
    const LOGGED = 40_000;
    const AFTER = 10;
    let stderr = '';
    const lines = await runChild(
      `
      for (let i = 0; i < ${LOGGED}; i++) sink.emit(${EVENT});
      setTimeout(() => {
        process.stderr.write('turned\\n');
        logger.flush(() => {
          for (let i = ${LOGGED}; i < ${LOGGED + AFTER}; i++) sink.emit(${EVENT});
          logger.flush(() => {
            process.stderr.write('counted ' + logLinesDropped(logger) + '\\n');
            process.exit(0);
          });
        });
      }, 0);
    `,
      {
        paused: true,
        onStderr: (child, text) => {
          stderr += text;
          if (text.includes('turned')) child.stdout?.resume();
        },
      },
    );
    const notice = lines.findIndex((line) => line.includes('"LOG_LINES_DROPPED"'));
    assert.ok(notice > 0, 'a LOG_LINES_DROPPED line');
    const kept = lines.slice(0, notice);
    assertNumbered(kept, notice);
    const bytes = kept.reduce((sum, line) => sum + Buffer.byteLength(line) + 1, 0);
    assert.ok(bytes > LOG_PENDING_MAX_BYTES && bytes <= LOG_PENDING_MAX_BYTES + LOG_STREAM_BATCH_BYTES + 2_048, String(bytes));
    const warning = JSON.parse(lines[notice] as string) as { level: number; code: string; dropped: number; msg: string };
    assert.equal(warning.level, 40);
    assert.equal(warning.dropped, LOGGED - kept.length);
    assert.match(warning.msg, /^\d+ log lines \(audit events among them\) were dropped/);
    assert.match(stderr, new RegExp(`^counted ${LOGGED - kept.length}$`, 'm'));
    const after = lines.slice(notice + 1).map((line) => (JSON.parse(line) as { ocsf: { unmapped: { n: number } } }).ocsf.unmapped.n);
    assert.deepEqual(after, Array.from({ length: AFTER }, (_, i) => LOGGED + i));
  });

  it('ends logging when the reader goes away (EPIPE): flush() still calls back and nothing is thrown', async () => {
    const result = await runChildResult(
      `
      for (let i = 0; i < 3000; i++) sink.emit(${EVENT});
      setTimeout(() => {
        for (let i = 3000; i < 3500; i++) sink.emit(${EVENT});
        logger.flush(() => {
          process.stderr.write('flushed\\n');
          process.exit(0);
        });
      }, 0);
    `,
      { closeStdout: true },
    );
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /^flushed$/m);
  });
});
