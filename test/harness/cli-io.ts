// recordingIo(): an in-process CliIo for calling a command directly, its stdout and stderr kept as text; its
// signal is already aborted, so a command that started returns at once.

import type { CliIo } from '../../src/app/cli/io.js';

export interface RecordingIo {
  readonly io: CliIo;
  stdout(): string;
  stderr(): string;
}

export function recordingIo(cwd: string, env: Readonly<Record<string, string | undefined>> = {}): RecordingIo {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = {
    stdout: { write: (text: string) => out.push(text) },
    stderr: { write: (text: string) => err.push(text) },
    env,
    cwd,
    signal: AbortSignal.abort(),
    now: Date.now,
  };
  return { io, stdout: () => out.join(''), stderr: () => err.join('') };
}
