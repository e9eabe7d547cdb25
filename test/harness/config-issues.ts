// `boundary run` flags through parseRunFlags and parseConfig, as the CLI takes them: the paths of the issues
// parseConfig reports, for the tests of each flag's rules.

import assert from 'node:assert/strict';
import { parseRunFlags } from '../../src/app/cli/run.js';
import { parseConfig } from '../../src/app/config.js';
import { isBoundaryError } from '../../src/shared/errors.js';

/** The paths of the issues parseConfig reports for these flags (paths resolved against `cwd`), or [] when it accepts them. */
export function configIssuePaths(argv: readonly string[], cwd = '/'): string[] {
  const raw = parseRunFlags(argv, cwd);
  assert.equal(typeof raw, 'object', String(raw));
  try {
    parseConfig(raw);
    return [];
  } catch (err) {
    assert.ok(isBoundaryError(err) && err.code === 'CONFIG_INVALID');
    return err.issues.map((i) => i.path);
  }
}
