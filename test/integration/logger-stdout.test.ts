// The default log destination (batched stdout, src/telemetry/log-destination.ts) in a real child process:
// lines reach the pipe on flush(), on the periodic flush when nothing else happens, and on exit.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { LOG_SLAB_BYTES } from '../../src/telemetry/log-destination.js';

const LOGGER = fileURLToPath(new URL('../../src/telemetry/logger.ts', import.meta.url));
const AUDIT = fileURLToPath(new URL('../../src/telemetry/audit.ts', import.meta.url));
const CHILD_TIMEOUT_MS = 20_000;
/** A line longer than a slab. */
const BIG_CHARS = LOG_SLAB_BYTES + 50_000;

/** Runs `body` (module code with `logger` and `sink` in scope) in a child; resolves its stdout lines. */
function runChild(body: string, options: { until?: (lines: string[]) => boolean } = {}): Promise<string[]> {
  const source = `
    const { createLogger } = await import(${JSON.stringify(LOGGER)});
    const { createAuditSink } = await import(${JSON.stringify(AUDIT)});
    const logger = createLogger({ format: 'json' });
    const sink = createAuditSink({ logger, now: () => 1767225600000, format: 'json' });
    ${body}
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', source], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    err += chunk;
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
  child.stdout.on('data', (chunk: string) => {
    out += chunk;
    if (options.until?.(complete(out))) child.kill('SIGTERM');
  });
  return once(child, 'exit').then(() => {
    clearTimeout(timer);
    const lines = complete(out);
    if (lines.length === 0 && err.length > 0) throw new Error(err);
    return lines;
  });
}

function complete(text: string): string[] {
  return text.split('\n').slice(0, -1);
}

const EVENT = `{ class: 'HTTP', activity: 'GET', severity: 'INFO', action: 'ALLOWED', engine: 'policy', policy: 'p',
  dst: { host: 'origin.example.test', port: 8080 }, http: { method: 'GET', url: 'http://origin.example.test:8080/é/' + i },
  message: 'FORWARD allowed GET origin.example.test:8080/é/' + i, reason: 'r', unmapped: { n: i, pad: 'x'.repeat(i % 300) } }`;

function assertNumbered(lines: string[], count: number): void {
  assert.equal(lines.length, count);
  lines.forEach((line, i) => {
    const parsed = JSON.parse(line) as { ocsf: { unmapped: { n: number } } };
    assert.equal(parsed.ocsf.unmapped.n, i, line.slice(0, 200));
  });
}

/** An event that repeats but for its source port (so its line comes from a template), with `text` in its path. */
function repeatingEvent(text: string): string {
  return `{ class: 'HTTP', activity: 'GET', severity: 'INFO', action: 'ALLOWED', engine: 'policy', policy: 'p',
    dst: { host: 'origin.example.test', port: 8080 }, src: { ip: '127.0.0.1', port: 40000 + i },
    http: { method: 'GET', url: 'http://origin.example.test:8080/${text}' }, message: 'FORWARD allowed GET origin.example.test:8080/${text}',
    reason: 'r', unmapped: { adapter: 'forward', status_code: 200 } }`;
}

describe('the default stdout log destination', () => {
  it('writes lines made from templates byte for byte as rendered ones, ASCII and not', async () => {
    const lines = await runChild(`
      for (let i = 0; i < 2000; i++) sink.emit(i % 2 === 0 ? ${repeatingEvent('ascii')} : ${repeatingEvent('é😀')});
      logger.flush(() => process.exit(0));
    `);
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
    `);
    assertNumbered(lines, 3000);
  });

  it('writes a line on its own within the flush interval when no more traffic comes', async () => {
    const lines = await runChild(
      `
      for (let i = 0; i < 3; i++) sink.emit(${EVENT});
      // Keeps the child alive so only the flush timer can write the lines; the parent waits on them (until).
      setInterval(() => {}, 1000);
    `,
      { until: (seen) => seen.length >= 3 },
    );
    assertNumbered(lines, 3);
  });

  it('writes pending lines when the process exits without a flush', async () => {
    // Below one batch: nothing is being written when exit comes (a write still in flight at exit is
    // sonic-boom's own limit; boundary's shutdown waits for logger.flush() instead).
    const lines = await runChild(`
      for (let i = 0; i < 5; i++) sink.emit(${EVENT});
      process.exit(0);
    `);
    assertNumbered(lines, 5);
  });

  it('keeps lines longer than a slab in order with the lines around them', async () => {
    const lines = await runChild(`
      for (let i = 0; i < 5; i++) sink.emit(${EVENT});
      logger.info({ n: 5, big: 'y'.repeat(${BIG_CHARS}) }, 'a line longer than a slab');
      sink.emit((() => { const i = 6; return ${EVENT}; })());
      logger.flush(() => process.exit(0));
    `);
    assert.equal(lines.length, 7);
    assert.equal((JSON.parse(lines[5] ?? '') as { big: string }).big.length, BIG_CHARS);
    assert.equal((JSON.parse(lines[6] ?? '') as { ocsf: { unmapped: { n: number } } }).ocsf.unmapped.n, 6);
  });
});
