// A command run as a process group of its own. execFile's timeout signals only the process it started (for `ip
// netns exec … bash -c …`, bash), so an npm, pip or curl that bash started lives on and may still write in a
// directory the test is about to remove. Here the timeout, and the command's end, kill the whole group.
import { spawn } from 'node:child_process';

export interface GroupOutcome {
  /** The exit code; -1 when the command was killed (its timeout) or could not start. */
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
}

export interface GroupOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly timeoutMs: number;
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // No process of the group is left.
  }
}

/** Runs `file args` in a new process group; once its leader exits (or `timeoutMs` passes), nothing of the group is left. */
export function runGroup(file: string, args: readonly string[], options: GroupOptions): Promise<GroupOutcome> {
  const child = spawn(file, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child.pid);
  }, options.timeoutMs);
  return new Promise((resolve) => {
    child.once('error', (err) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: `${stderr}${err.message}`, timedOut });
    });
    // The leader's exit ends the group: what it left running would hold the pipes open and hold back 'close'.
    child.once('exit', () => killGroup(child.pid));
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr, timedOut });
    });
  });
}
