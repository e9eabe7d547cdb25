// The sections boundary accepts but does not enforce (filesystem_policy, landlock, process): read for shape and
// checked value by value as OpenShell checks them, so a file boundary loads also starts a sandbox there
// (docs/policy.md#sections-boundary-does-not-enforce). One warning names every present section as not enforced.

import { NOT_ENFORCED_SECTION_KEYS, NOT_ENFORCED_SECTIONS } from './format.js';
import {
  childPath,
  type Field,
  knownFields,
  type Node,
  type ReadContext,
  readBool,
  readMap,
  readSeq,
  readString,
  report,
  scalarValue,
} from './yaml-source.js';

/** Paths in read_only and read_write together. */
export const MAX_FILESYSTEM_PATHS = 256;
/** One filesystem path, in UTF-8 bytes (PATH_MAX). */
export const MAX_FILESYSTEM_PATH_BYTES = 4096;
/** The largest user or group id OpenShell accepts: 4294967295 is (uid_t)-1, "no change". */
const MAX_PROCESS_ID = 4_294_967_294;
const LANDLOCK_COMPATIBILITY = ['best_effort', 'hard_requirement'] as const;
/** The name OpenShell gives the sandbox's own user and group. */
const SANDBOX_ACCOUNT = 'sandbox';

/** Reads the three sections of `top`; returns the names of those present, in catalogue order. */
export function readSandboxSections(ctx: ReadContext, top: ReadonlyMap<string, Field>): string[] {
  const present: string[] = [];
  for (const section of NOT_ENFORCED_SECTIONS) {
    const field = top.get(section);
    if (field === undefined) continue;
    present.push(section);
    const map = readMap(ctx, field.value, section);
    if (map === undefined) continue;
    const fields = knownFields(ctx, map, section, NOT_ENFORCED_SECTION_KEYS[section]);
    if (section === 'filesystem_policy') readFilesystem(ctx, fields);
    else if (section === 'landlock') readLandlock(ctx, fields.get('compatibility'));
    else for (const key of ['run_as_user', 'run_as_group']) readAccount(ctx, fields.get(key), childPath(section, key));
  }
  // Said once per file, at the first section: the three are one fact about boundary, not three findings.
  const first = present[0];
  const at = first === undefined ? undefined : top.get(first);
  if (first !== undefined && at !== undefined) {
    report(ctx, at.keyNode, first, 'POLICY_WARN_NOT_ENFORCED', `${present.join(', ')} ${present.length === 1 ? 'is' : 'are'} checked but not enforced by boundary (the sandbox runtime applies them)`);
  }
  return present;
}

function readFilesystem(ctx: ReadContext, fields: ReadonlyMap<string, Field>): void {
  readBool(ctx, fields.get('include_workdir'), 'filesystem_policy.include_workdir');
  let total = 0;
  for (const key of ['read_only', 'read_write'] as const) {
    const field = fields.get(key);
    if (field === undefined) continue;
    const path = childPath('filesystem_policy', key);
    const seq = readSeq(ctx, field.value, path);
    if (seq === undefined) continue;
    total += seq.items.length;
    seq.items.forEach((item, i) => {
      const problem = filesystemPathProblem(scalarValue(item), key === 'read_write');
      if (problem === undefined) return;
      report(ctx, item ?? seq, childPath(path, i), problem.code, problem.message);
    });
  }
  if (total > MAX_FILESYSTEM_PATHS) {
    const at = fields.get('read_write') ?? fields.get('read_only');
    report(ctx, at?.keyNode, 'filesystem_policy', 'POLICY_SANDBOX_INVALID',
      `read_only and read_write list ${total} paths; at most MAX_FILESYSTEM_PATHS (${MAX_FILESYSTEM_PATHS})`);
  }
}

function filesystemPathProblem(value: unknown, writable: boolean): { code: 'POLICY_TYPE' | 'POLICY_SANDBOX_INVALID'; message: string } | undefined {
  if (typeof value !== 'string') return { code: 'POLICY_TYPE', message: 'a filesystem path must be a string' };
  const invalid = (message: string) => ({ code: 'POLICY_SANDBOX_INVALID' as const, message });
  if (!value.startsWith('/')) return invalid(`${value} is not an absolute path`);
  if (value.split('/').includes('..')) return invalid(`${value} has a .. component`);
  if (Buffer.byteLength(value, 'utf8') > MAX_FILESYSTEM_PATH_BYTES) return invalid(`the path is longer than ${MAX_FILESYSTEM_PATH_BYTES} bytes`);
  // `//` and `///` are the root too.
  if (writable && /^\/+$/.test(value)) return invalid('read_write may not be / (the whole file system)');
  return undefined;
}

function readLandlock(ctx: ReadContext, field: Field | undefined): void {
  const path = 'landlock.compatibility';
  const value = readString(ctx, field, path);
  if (value === undefined || (LANDLOCK_COMPATIBILITY as readonly string[]).includes(value)) return;
  report(ctx, field?.value, path, 'POLICY_SANDBOX_INVALID', `compatibility must be ${LANDLOCK_COMPATIBILITY.join(' or ')}`);
}

/** `run_as_user` / `run_as_group`: empty, `sandbox`, or a decimal id other than root's 0 and (uid_t)-1. */
function readAccount(ctx: ReadContext, field: Field | undefined, path: string): void {
  const value = readString(ctx, field, path);
  if (value === undefined || value === '' || value === SANDBOX_ACCOUNT) return;
  const node: Node | null | undefined = field?.value;
  const id = /^[0-9]{1,10}$/.test(value) ? Number(value) : undefined;
  if (id !== undefined && id >= 1 && id <= MAX_PROCESS_ID) return;
  const why = id === 0 ? 'root (0) is refused' : `must be ${SANDBOX_ACCOUNT} or a decimal id 1-${MAX_PROCESS_ID}`;
  report(ctx, node, path, 'POLICY_SANDBOX_INVALID', `${value}: ${why}`);
}
