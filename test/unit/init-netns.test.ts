// `boundary init-netns` without root: the exact commands and their order (the fence's meaning depends on
// it), and the CLI in --dry-run, which prints them and runs nothing. netns-fence.test.ts runs them for real.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_BOUNDARY_UID, DEFAULT_SYNTHETIC_CIDR, initNetnsCommand, netnsCommands } from '../../src/cli/init-netns.js';
import type { CliIo } from '../../src/cli/io.js';

async function runCli(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: {},
    cwd: '/',
    signal: new AbortController().signal,
    now: () => 0,
  };
  const code = await initNetnsCommand(argv, io);
  return { code, stdout, stderr };
}

describe('netnsCommands', () => {
  it('only routes the synthetic range to lo when the fence is off', () => {
    assert.deepEqual(netnsCommands({ cidr: '198.18.0.0/15', uid: 10001, fence: false }), [['ip', 'route', 'replace', 'local', '198.18.0.0/15', 'dev', 'lo']]);
  });

  it('fences IPv4 and IPv6 alike: loopback and boundary uid first, then a TCP reset, then a reject for the rest', () => {
    const commands = netnsCommands({ cidr: '198.18.0.0/15', uid: 4242, fence: true });
    assert.deepEqual(commands[0], ['ip', 'route', 'replace', 'local', '198.18.0.0/15', 'dev', 'lo']);
    const head = (tool: string) => [
      [tool, '-w', '-A', 'OUTPUT', '-o', 'lo', '-j', 'ACCEPT'],
      [tool, '-w', '-A', 'OUTPUT', '-m', 'owner', '--uid-owner', '4242', '-j', 'ACCEPT'],
    ];
    const tail = (tool: string) => [
      [tool, '-w', '-A', 'OUTPUT', '-p', 'tcp', '-j', 'REJECT', '--reject-with', 'tcp-reset'],
      [tool, '-w', '-A', 'OUTPUT', '-j', 'REJECT'],
    ];
    assert.deepEqual(
      commands.filter((c) => c[0] === 'iptables'),
      [...head('iptables'), ...tail('iptables')],
    );
    // Neighbour discovery is sent by the kernel under no uid: without it boundary's own IPv6 would not get out.
    assert.deepEqual(
      commands.filter((c) => c[0] === 'ip6tables'),
      [
        ...head('ip6tables'),
        ['ip6tables', '-w', '-A', 'OUTPUT', '-p', 'ipv6-icmp', '--icmpv6-type', 'neighbour-solicitation', '-j', 'ACCEPT'],
        ['ip6tables', '-w', '-A', 'OUTPUT', '-p', 'ipv6-icmp', '--icmpv6-type', 'neighbour-advertisement', '-j', 'ACCEPT'],
        ...tail('ip6tables'),
      ],
    );
    assert.equal(commands.length, 11);
  });

  it('never accepts by state or address: only loopback, the owner match and neighbour discovery get out', () => {
    const accepts = netnsCommands({ cidr: '198.18.0.0/15', uid: 10001, fence: true }).filter((c) => c.at(-1) === 'ACCEPT');
    for (const rule of accepts) {
      const match = rule.slice(4, -2).join(' ');
      assert.ok(
        match === '-o lo' || match === '-m owner --uid-owner 10001' || /^-p ipv6-icmp --icmpv6-type neighbour-(solicitation|advertisement)$/.test(match),
        `unexpected ACCEPT ${rule.join(' ')}`,
      );
    }
  });
});

describe('boundary init-netns', () => {
  it('prints the commands with its defaults and runs none of them under --dry-run', async () => {
    const { code, stdout, stderr } = await runCli(['--dry-run']);
    assert.equal(code, 0, stderr);
    const expected = netnsCommands({ cidr: DEFAULT_SYNTHETIC_CIDR, uid: DEFAULT_BOUNDARY_UID, fence: true });
    assert.equal(stdout, expected.map((c) => `${c.join(' ')}\n`).join(''));
  });

  it('passes --synthetic-cidr, --boundary-uid and --no-fence through', async () => {
    const { code, stdout } = await runCli(['--dry-run', '--synthetic-cidr', '127.77.0.0/16', '--boundary-uid', '123', '--no-fence']);
    assert.equal(code, 0);
    assert.equal(stdout, 'ip route replace local 127.77.0.0/16 dev lo\n');
    const fenced = await runCli(['--dry-run', '--boundary-uid', '123']);
    assert.match(fenced.stdout, /^iptables -w -A OUTPUT -m owner --uid-owner 123 -j ACCEPT$/m);
  });

  it('refuses a bad CIDR, a bad uid or an unknown option with a usage error and runs nothing', async () => {
    for (const argv of [
      ['--dry-run', '--synthetic-cidr', 'nope'],
      ['--dry-run', '--boundary-uid', '-1'],
      ['--dry-run', '--boundary-uid', 'abc'],
      ['--dry-run', '--bogus'],
    ]) {
      const { code, stdout, stderr } = await runCli(argv);
      assert.equal(code, 2, argv.join(' '));
      assert.equal(stdout, '');
      assert.match(stderr, /USAGE/);
    }
  });
});
