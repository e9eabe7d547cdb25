// The internet of the README's walk-through, for test/integration/first-run.test.ts (root only): startReadmeWorld()
// writes the stand-ins' CA and certificate, a wheel, a bare git repository and the hosts file that sends the
// README's public names to the "outside" namespace of a netns pair, then starts readme-origins.ts there. Nothing
// leaves the namespaces the test created.

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createCertificateAuthority } from '../../src/pki/ca.js';
import { issueCertificate } from '../../src/pki/issue.js';
import { type LoggedChild, spawnLogged } from './child-lines.js';
import { PROJECT_ROOT } from './cli-boundary.js';
import { CLEAN_ENV, type NetnsPair } from './netns-pair.js';
import type { ReadmeOriginsConfig } from './readme-origins.js';

const run = promisify(execFile);
const ORIGINS_MAIN = fileURLToPath(new URL('./readme-origins.ts', import.meta.url));
/** The names the walk-through uses; policies/default.yaml allows all but example.com. */
export const README_HOSTS = ['pypi.org', 'files.pythonhosted.org', 'registry.npmjs.org', 'github.com', 'example.com'] as const;
export const WHEEL_NAME = 'requests-2.32.3-py3-none-any.whl';
export const NPM_PACKAGE = { name: 'left-pad', version: '1.3.0' } as const;
export const REPO_README = 'cloned through boundary\n';

// A minimal valid wheel: METADATA, WHEEL and a RECORD listing both with their digests.
const WHEEL_SCRIPT = `
import base64, hashlib, sys, zipfile
files = {
  'requests/__init__.py': b'',
  'requests-2.32.3.dist-info/METADATA': b'Metadata-Version: 2.1\\nName: requests\\nVersion: 2.32.3\\n',
  'requests-2.32.3.dist-info/WHEEL': b'Wheel-Version: 1.0\\nGenerator: boundary-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',
}
record = ''.join('%s,sha256=%s,%d\\n' % (name, base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode(), len(data)) for name, data in files.items())
with zipfile.ZipFile(sys.argv[1], 'w') as wheel:
    for name, data in files.items():
        wheel.writestr(name, data)
    wheel.writestr('requests-2.32.3.dist-info/RECORD', record + 'requests-2.32.3.dist-info/RECORD,,\\n')
`;

export interface Hit {
  readonly host: string;
  readonly method: string;
  readonly path: string;
}

export interface ReadmeWorld {
  /** The stand-ins' CA: for boundary's --upstream-ca, as the public roots are for the real hosts. */
  readonly caFile: string;
  /** The README's names -> the outside namespace: for boundary's --hosts. */
  readonly hostsFile: string;
  /** Every request an origin received so far. */
  hits(): Hit[];
  readonly origins: LoggedChild;
}

async function git(...args: string[]): Promise<void> {
  await run('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=main', ...args], { env: CLEAN_ENV });
}

export async function startReadmeWorld(t: TestContext, pair: NetnsPair, dir: string): Promise<ReadmeWorld> {
  const ca = await createCertificateAuthority({ commonName: 'README stand-ins CA', now: Date.now });
  const leaf = await issueCertificate({ ca, kind: 'server', names: README_HOSTS.filter((h) => h !== 'example.com'), now: Date.now });
  const files = { caFile: join(dir, 'stand-ins-ca.pem'), certFile: join(dir, 'origin.pem'), keyFile: join(dir, 'origin.key'), wheelFile: join(dir, WHEEL_NAME), hostsFile: join(dir, 'hosts') };
  await writeFile(files.caFile, ca.certPem);
  await writeFile(files.certFile, leaf.certPem);
  await writeFile(files.keyFile, leaf.keyPem);
  await writeFile(files.hostsFile, README_HOSTS.map((host) => `${pair.outsideIp} ${host}\n`).join(''));
  await run('python3', ['-c', WHEEL_SCRIPT, files.wheelFile], { env: { ...CLEAN_ENV, ...(process.env.PYENV_ROOT === undefined ? {} : { PYENV_ROOT: process.env.PYENV_ROOT }) } });
  const work = join(dir, 'repo-work');
  const gitRoot = join(dir, 'git-root');
  await mkdir(work);
  await writeFile(join(work, 'README.md'), REPO_README);
  await git('-C', work, 'init', '-q');
  await git('-C', work, 'add', 'README.md');
  await git('-C', work, 'commit', '-qm', 'one');
  await git('clone', '-q', '--bare', work, join(gitRoot, 'psf', 'requests.git'));
  const config: ReadmeOriginsConfig = {
    ip: pair.outsideIp,
    certFile: files.certFile,
    keyFile: files.keyFile,
    wheelFile: files.wheelFile,
    wheelName: WHEEL_NAME,
    wheelSha256: createHash('sha256').update(await readFile(files.wheelFile)).digest('hex'),
    gitRoot,
    npmPackage: NPM_PACKAGE,
  };
  const configFile = join(dir, 'origins.json');
  await writeFile(configFile, JSON.stringify(config));
  const tsx = import.meta.resolve('tsx');
  const origins = spawnLogged(['ip', 'netns', 'exec', pair.outside, process.execPath, '--import', tsx, ORIGINS_MAIN, configFile], { cwd: PROJECT_ROOT, label: 'README origins' });
  t.after(() => origins.stop());
  await origins.waitForText((line) => line === 'READY');
  return {
    caFile: files.caFile,
    hostsFile: files.hostsFile,
    hits: () => origins.lines.flatMap((line) => (line.hit === undefined ? [] : [line.hit as Hit])),
    origins,
  };
}
