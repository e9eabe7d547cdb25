// One process as policy sees it (docs/identity.md#how-a-connection-maps-to-a-process): the kernel's path of its
// executable (with the ` (deleted)` rule), its ancestors through the parent pid, and the argv entries that look
// like paths. The argv reading is cached by (pid, start time, executable), so a reused pid or an exec reads
// afresh; executables and parents are read anew on every lookup, as an exec or a reparenting changes them.

import { errorCode, type ProcFs } from './proc-fs.js';

/** Parents followed above the owner; the walk also ends at pid 1 or at a parent outside the PID namespace (0). */
export const MAX_ANCESTOR_DEPTH = 64;
/** argv read per process: the paths that matter (interpreter, script) come first. */
export const MAX_CMDLINE_BYTES = 4_096;
export const MAX_CMDLINE_PATHS = 16;
/** Owners whose argv paths are remembered; the oldest reading is dropped beyond this. */
export const MAX_CACHED_PROCESSES = 4_096;
/** /proc/<pid>/stat is one line of a few hundred bytes (comm is at most 16). */
const STAT_BYTES = 1_024;
/** Fields after `(comm)`: state is the first, ppid the second, starttime the twentieth. */
const PPID_INDEX = 1;
const STARTTIME_INDEX = 19;
const DELETED_SUFFIX = ' (deleted)';
// An argv entry shown as a path: absolute and printable, without the characters that mark options or credentials
// (`--x=y`, `user:pass`, `a@b`) or a shell command (whitespace): argv is the workload's, and events are logged.
const ARGV_PATH = /^\/[!-~]{0,255}$/;
const NOT_A_PATH = /[=:@]/;

interface CachedProcess {
  readonly starttime: string;
  readonly exe: string;
  readonly cmdlinePaths: readonly string[];
}

export interface ProcContext {
  /** `/proc` in production; another directory in tests. */
  readonly root: string;
  readonly fs: ProcFs;
  readonly processes: Map<number, CachedProcess>;
}

/** A process of the chain (the owner, then its parent, ...), with the path its executable is known by. */
export interface ChainLink {
  readonly pid: number;
  /** undefined when it cannot be read (another uid without CAP_SYS_PTRACE, a kernel thread): it grants nothing. */
  readonly exe: string | undefined;
  /** The kernel said ` (deleted)` and no file of that name exists: the running file is no longer at its path. */
  readonly deleted: boolean;
}

/** The owner of a socket and its ancestors, nearest first. */
export interface Chain {
  readonly owner: ChainLink & { readonly exe: string };
  readonly ancestors: readonly ChainLink[];
  readonly cmdlinePaths: readonly string[];
}

export type ChainRead = { readonly ok: true; readonly chain: Chain } | { readonly ok: false; readonly failure: 'owner-exited' | 'permission-denied'; readonly detail: string };

type ProcessRead =
  | { readonly ok: true; readonly ppid: number; readonly starttime: string; readonly exe: { readonly path: string; readonly deleted: boolean } | undefined }
  | { readonly ok: false; readonly failure: 'owner-exited' | 'permission-denied' };

function failureOf(err: unknown): 'owner-exited' | 'permission-denied' {
  const code = errorCode(err);
  return code === 'EACCES' || code === 'EPERM' ? 'permission-denied' : 'owner-exited';
}

/** readlink of /proc/<pid>/exe as policy compares it: one ` (deleted)` taken off only when the file is really gone. */
async function executable(ctx: ProcContext, pid: number): Promise<{ path: string; deleted: boolean }> {
  const target = await ctx.fs.readlink(`${ctx.root}/${pid}/exe`);
  if (!target.endsWith(DELETED_SUFFIX)) return { path: target, deleted: false };
  // The path is the process's own (its mount namespace): look it up through its root, not ours.
  const exists = await ctx.fs.lstat(`${ctx.root}/${pid}/root${target}`).then(
    () => true,
    () => false,
  );
  return exists ? { path: target, deleted: false } : { path: target.slice(0, -DELETED_SUFFIX.length), deleted: true };
}

function argvPaths(cmdline: string): string[] {
  return cmdline.split('\0').filter((arg) => ARGV_PATH.test(arg) && !NOT_A_PATH.test(arg));
}

/** stat (world-readable) for the parent and start time, then the executable, which needs ptrace access. */
async function readProcess(ctx: ProcContext, pid: number): Promise<ProcessRead> {
  let text: string;
  try {
    text = await ctx.fs.readText(`${ctx.root}/${pid}/stat`, STAT_BYTES);
  } catch (err) {
    return { ok: false, failure: failureOf(err) };
  }
  // comm may hold spaces and parentheses: the fields start after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const ppid = Number(fields[PPID_INDEX]);
  const starttime = fields[STARTTIME_INDEX] ?? '';
  try {
    return { ok: true, ppid, starttime, exe: await executable(ctx, pid) };
  } catch (err) {
    // Another uid's process without CAP_SYS_PTRACE, or a kernel thread (no executable): only its parent is known.
    return failureOf(err) === 'permission-denied' ? { ok: true, ppid, starttime, exe: undefined } : { ok: false, failure: 'owner-exited' };
  }
}

/** The owner's argv paths, read once per (pid, start time, executable): an exec changes the executable. */
async function ownerArgv(ctx: ProcContext, pid: number, starttime: string, exe: string): Promise<readonly string[]> {
  const cached = ctx.processes.get(pid);
  if (cached !== undefined && cached.starttime === starttime && cached.exe === exe) return cached.cmdlinePaths;
  const cmdline = await ctx.fs.readText(`${ctx.root}/${pid}/cmdline`, MAX_CMDLINE_BYTES).catch(() => '');
  const cmdlinePaths = [...new Set(argvPaths(cmdline))].filter((p) => p !== exe).slice(0, MAX_CMDLINE_PATHS);
  ctx.processes.delete(pid);
  ctx.processes.set(pid, { starttime, exe, cmdlinePaths });
  if (ctx.processes.size > MAX_CACHED_PROCESSES) ctx.processes.delete(ctx.processes.keys().next().value as number);
  return cmdlinePaths;
}

/** The owner's executable, ancestors and argv paths; a failure only when the owner itself cannot be read. */
export async function readChain(ctx: ProcContext, pid: number): Promise<ChainRead> {
  const owner = await readProcess(ctx, pid);
  if (!owner.ok || owner.exe === undefined) {
    const failure = owner.ok ? 'permission-denied' : owner.failure;
    return { ok: false, failure, detail: `pid ${pid}: its executable could not be read` };
  }
  const ancestors: ChainLink[] = [];
  let parent = owner.ppid;
  for (let depth = 0; depth < MAX_ANCESTOR_DEPTH && parent > 0; depth++) {
    const read = await readProcess(ctx, parent);
    if (!read.ok) break;
    // An ancestor whose executable cannot be read grants nothing; the walk goes on through its parent.
    ancestors.push({ pid: parent, exe: read.exe?.path, deleted: read.exe?.deleted ?? false });
    if (parent === 1) break;
    parent = read.ppid;
  }
  // The owner's own argv only: a script's path is there (`#!/usr/bin/env python3` ends as `python3 /path/script`);
  // its ancestors' argv would mostly name the launchers' own scripts.
  const cmdlinePaths = await ownerArgv(ctx, pid, owner.starttime, owner.exe.path);
  return { ok: true, chain: { owner: { pid, exe: owner.exe.path, deleted: owner.exe.deleted }, ancestors, cmdlinePaths } };
}
