// Issue 33 made the audit log to a regular file a synchronous writer, which pino does not flush at exit: lines still
// batched when the process exited without logger.flush() (a fatal error, process.exit elsewhere) were lost. Each
// kind of stdout now keeps them.
import { describe, it } from 'node:test';
import { assertNumbered, EVENT, runChild } from '../harness/log-child.js';

describe('issue 33: log lines still batched at exit', () => {
  for (const stdout of ['pipe', 'file'] as const) {
    it(`reach stdout when the process exits without a flush (stdout a ${stdout})`, async () => {
      const lines = await runChild(
        `
        for (let i = 0; i < 5; i++) sink.emit(${EVENT});
        process.exit(0);
      `,
        { stdout },
      );
      assertNumbered(lines, 5);
    });
  }
});
