// The version of this build, read once from package.json beside src/ and dist/ (this file sits two levels below it).
// Never throws: a copy without package.json reports `unknown`.

import { readFileSync } from 'node:fs';

export const UNKNOWN_VERSION = 'unknown';

export function readPackageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : UNKNOWN_VERSION;
  } catch {
    return UNKNOWN_VERSION;
  }
}
