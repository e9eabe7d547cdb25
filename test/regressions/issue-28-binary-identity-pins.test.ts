// Issue 28 (red-team report against boundary), finding 2 and the binary pins OpenShell now keeps: a listed
// executable in a directory the workload (uid 65534) can write was whatever the workload put there. Its content is
// now pinned on first use: changed in place, or replaced by another file, it is refused with executable-changed
// and a finding that name the path (never a hash, in any line either process writes); a file with the pinned
// content passes again, and a program started before its file was replaced keeps going (docs/identity.md#pinning).

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chown, copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it } from 'node:test';
import { CLIENT_UID, describeEachSource, policyYaml, PROXY_URL } from '../harness/identity-netns.js';
import { netnsSkipReason } from '../harness/netns-pair.js';

const skip = await netnsSkipReason(['setpriv', 'curl']);
const TOOLS = 'tools';

function policy(port: number, dir: string): string {
  return policyYaml(port, { tools: { host: 'tool.example.test', binaries: [join(dir, TOOLS, 'tool'), join(dir, TOOLS, 'long-running')] } });
}

/** tools/ belongs to the workload; tool and long-running are its copies of curl. */
async function installTools(dir: string): Promise<void> {
  const tools = join(dir, TOOLS);
  await mkdir(tools, { mode: 0o755 });
  await chown(tools, CLIENT_UID, CLIENT_UID);
  for (const name of ['tool', 'long-running']) {
    await copyFile('/usr/bin/curl', join(tools, name));
    await chown(join(tools, name), CLIENT_UID, CLIENT_UID);
  }
}

// The workload upgrades long-running while it runs: its first request, then its file replaced by another with
// other content (written beside it and renamed over), then its second request. Prints both statuses.
const UPGRADE = (tool: string, url: string) => `import os, shutil, subprocess
tool = '${tool}'
args = ['-sS', '--noproxy', '', '-x', '${PROXY_URL}', '-o', '/dev/null', '-w', '%{stderr}%{http_code}\\n']
p = subprocess.Popen([tool, *args, '${url}/before', '--next', 'file:///dev/stdin', '--next', *args, '${url}/after'],
                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
before = p.stderr.readline().decode().strip()
shutil.copyfile(tool, tool + '.new')
with open(tool + '.new', 'ab') as f:
    f.write(b'upgraded')
os.chmod(tool + '.new', 0o755)
os.rename(tool + '.new', tool)
p.stdin.close()
after = p.stderr.readline().decode().strip()
p.wait()
print(before, after)`;

describeEachSource('issue 28: a listed executable is the content pinned on first use', { tag: 'pn', skip, policy, setup: installTools }, (env) => {
  const tool = () => join(env().dir, TOOLS, 'tool');
  const url = (path: string) => `http://tool.example.test:${env().originPort}${path}`;
  const sha256 = async (path: string) => createHash('sha256').update(await readFile(path)).digest('hex');

  it('refuses the listed executable once its content changed in place, naming its path and no hash', async () => {
    const pinned = await sha256(tool());
    assert.equal((await env().curl(url('/pinned'), { exe: [tool()] })).status, '200');
    await env().asClient(['sh', '-c', `printf changed >> ${tool()}`]);
    const changed = await sha256(tool());
    const since = env().boundary.lines.length;
    assert.equal((await env().curl(url('/changed'), { exe: [tool()] })).status, '403');
    const event = await env().event(since, (u, line) => u.reason_code !== undefined && JSON.stringify(line.ocsf).includes('/changed'));
    assert.deepEqual([event.ocsf?.unmapped?.reason_code, event.ocsf?.unmapped?.identity_failure], ['identity-unavailable', 'executable-changed']);
    const finding = await env().event(since, (u) => u.finding === 'executable-changed');
    assert.ok((finding.ocsf?.message ?? '').includes(tool()), finding.ocsf?.message);
    // Still refused: a pin is kept until the identity source restarts.
    assert.equal((await env().curl(url('/again'), { exe: [tool()] })).status, '403');
    const written = [env().boundary.stdout(), env().boundary.stderr(), env().identity?.stdout() ?? '', env().identity?.stderr() ?? ''].join('\n');
    for (const hash of [pinned, changed]) assert.ok(!written.includes(hash), 'no hash in any line');
  });

  it('refuses another file put in its place, and passes one with the pinned content', async () => {
    await env().asClient(['sh', '-c', `cp /usr/bin/curl ${tool()}.new && printf other >> ${tool()}.new && mv ${tool()}.new ${tool()}`]);
    assert.equal((await env().curl(url('/replaced'), { exe: [tool()] })).status, '403');
    await env().asClient(['sh', '-c', `cp /usr/bin/curl ${tool()}.new && mv ${tool()}.new ${tool()}`]);
    assert.equal((await env().curl(url('/restored'), { exe: [tool()] })).status, '200');
  });

  it('lets a program started before its file was replaced keep going on its pinned content, and refuses the new file', async () => {
    const longRunning = join(env().dir, TOOLS, 'long-running');
    await writeFile(join(env().dir, 'upgrade.py'), UPGRADE(longRunning, url('/upgrade')));
    const ran = await env().asClient(['/usr/bin/python3', join(env().dir, 'upgrade.py')]);
    assert.equal(ran.stdout.trim(), '200 200', `before and after the upgrade: ${ran.stdout} ${ran.stderr}`);
    assert.equal((await env().curl(url('/upgraded'), { exe: [longRunning] })).status, '403', 'the new file is refused until restart');
  });
});
