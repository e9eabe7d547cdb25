// `boundary init-netns` without root: the exact commands and their order (the fence's meaning depends on
// it), and the CLI in --dry-run, which prints them and runs nothing. netns-fence.test.ts and
// netns-dns-redirect.test.ts run them for real.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DEFAULT_BOUNDARY_UID,
  DEFAULT_DNS_PORT,
  DEFAULT_SYNTHETIC_CIDR,
  DNS_CHAIN,
  DNS_CONNTRACK_ZONE,
  DNS_ZONE_CHAIN,
  FENCE_CHAIN,
  formatStep,
  initNetnsCommand,
  type NetnsStep,
  netnsCommands,
} from '../../src/app/cli/init-netns.js';
import type { CliIo } from '../../src/app/cli/io.js';

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

const ROUTE = ['ip', 'route', 'replace', 'local', '198.18.0.0/15', 'dev', 'lo'];

/** The rules appended to one of init-netns's own chains, without the tool, table and chain words. */
function rulesOf(steps: readonly NetnsStep[], tool: string, chain: string): string[][] {
  return steps.filter((s) => s.run[0] === tool && s.run[4] === '-A' && s.run[5] === chain).map((s) => s.run.slice(6));
}

describe('netnsCommands', () => {
  it('only routes the synthetic range to lo when the fence and the DNS redirect are off', () => {
    assert.deepEqual(netnsCommands({ cidr: '198.18.0.0/15', uid: 10001, fence: false }), [{ run: ROUTE }]);
  });

  it('fills each own chain from empty and adds its OUTPUT jump only when -C does not find it', () => {
    const steps = netnsCommands({ cidr: '198.18.0.0/15', uid: 4242, fence: true, dnsPort: 15053 });
    assert.deepEqual(steps[0], { run: ROUTE });
    for (const [tool, table, chain] of [
      ['iptables', 'raw', DNS_ZONE_CHAIN],
      ['iptables', 'nat', DNS_CHAIN],
      ['iptables', 'filter', FENCE_CHAIN],
      ['ip6tables', 'filter', FENCE_CHAIN],
    ] as const) {
      const base = [tool, '-w', '-t', table];
      const own = steps.filter((s) => s.run.slice(0, 4).join(' ') === base.join(' '));
      assert.deepEqual(own[0], { run: [...base, '-N', chain], unless: [...base, '-S', chain] });
      assert.deepEqual(own[1], { run: [...base, '-F', chain] });
      assert.deepEqual(own.at(-1), { run: [...base, '-I', 'OUTPUT', '1', '-j', chain], unless: [...base, '-C', 'OUTPUT', '-j', chain] });
      // Everything between the flush and the jump appends to the own chain: nothing is added to OUTPUT twice.
      assert.ok(own.slice(2, -1).every((s) => s.run[4] === '-A' && s.run[5] === chain && s.unless === undefined), `${tool} ${table}`);
    }
    // A restarted init container runs the very same steps.
    assert.deepEqual(steps, netnsCommands({ cidr: '198.18.0.0/15', uid: 4242, fence: true, dnsPort: 15053 }));
  });

  it('sends the DNS of every other uid (UDP and TCP, to any address) to 127.0.0.1 on the given port', () => {
    const steps = netnsCommands({ cidr: '198.18.0.0/15', uid: 4242, fence: false, dnsPort: 15999 });
    assert.deepEqual(
      rulesOf(steps, 'iptables', DNS_CHAIN),
      ['udp', 'tcp'].map((p) => ['-p', p, '--dport', '53', '-m', 'owner', '!', '--uid-owner', '4242', '-j', 'DNAT', '--to-destination', '127.0.0.1:15999']),
    );
    // boundary's own queries are looked up in a conntrack zone of their own, before any nat rule runs.
    assert.deepEqual(
      rulesOf(steps, 'iptables', DNS_ZONE_CHAIN),
      ['udp', 'tcp'].map((p) => ['-p', p, '--dport', '53', '-m', 'owner', '--uid-owner', '4242', '-j', 'CT', '--zone-orig', String(DNS_CONNTRACK_ZONE)]),
    );
    // No IPv6 redirect: policy DNS listens on 127.0.0.1 only, and the fence rejects IPv6 DNS at once.
    assert.ok(steps.every((s) => s.run[0] !== 'ip6tables'));
    assert.ok(!steps.some((s) => s.run.includes(FENCE_CHAIN)));
  });

  it('fences IPv4 and IPv6 alike: loopback, boundary uid and inbound replies first, then a TCP reset, then a reject', () => {
    const steps = netnsCommands({ cidr: '198.18.0.0/15', uid: 4242, fence: true });
    const head = [
      ['-o', 'lo', '-j', 'ACCEPT'],
      ['-m', 'owner', '--uid-owner', '4242', '-j', 'ACCEPT'],
      ['-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '--ctdir', 'REPLY', '-j', 'ACCEPT'],
    ];
    const tail = [
      ['-p', 'tcp', '-j', 'REJECT', '--reject-with', 'tcp-reset'],
      ['-j', 'REJECT'],
    ];
    assert.deepEqual(rulesOf(steps, 'iptables', FENCE_CHAIN), [...head, ...tail]);
    // Neighbour discovery is sent by the kernel under no uid: without it boundary's own IPv6 would not get out.
    assert.deepEqual(rulesOf(steps, 'ip6tables', FENCE_CHAIN), [
      ...head,
      ['-p', 'ipv6-icmp', '--icmpv6-type', 'neighbour-solicitation', '-j', 'ACCEPT'],
      ['-p', 'ipv6-icmp', '--icmpv6-type', 'neighbour-advertisement', '-j', 'ACCEPT'],
      ...tail,
    ]);
    assert.ok(!steps.some((s) => s.run.includes(DNS_CHAIN) || s.run.includes(DNS_ZONE_CHAIN)));
  });

  it('lets the redirected DNS through the IPv4 fence, after loopback and before the owner match', () => {
    const rules = rulesOf(netnsCommands({ cidr: '198.18.0.0/15', uid: 4242, fence: true, dnsPort: 15053 }), 'iptables', FENCE_CHAIN);
    assert.deepEqual(rules.slice(0, 4), [
      ['-o', 'lo', '-j', 'ACCEPT'],
      ['-d', '127.0.0.1/32', '-p', 'udp', '--dport', '15053', '-j', 'ACCEPT'],
      ['-d', '127.0.0.1/32', '-p', 'tcp', '--dport', '15053', '-j', 'ACCEPT'],
      ['-m', 'owner', '--uid-owner', '4242', '-j', 'ACCEPT'],
    ]);
  });

  it('accepts by state only replies to inbound connections: otherwise loopback, redirected DNS, the owner match and neighbour discovery', () => {
    const steps = netnsCommands({ cidr: '198.18.0.0/15', uid: 10001, fence: true, dnsPort: 15053 });
    const accepts = [...rulesOf(steps, 'iptables', FENCE_CHAIN), ...rulesOf(steps, 'ip6tables', FENCE_CHAIN)].filter((r) => r.at(-1) === 'ACCEPT');
    for (const rule of accepts) {
      const match = rule.slice(0, -2).join(' ');
      assert.ok(
        match === '-o lo' ||
          match === '-m owner --uid-owner 10001' ||
          match === '-m conntrack --ctstate ESTABLISHED,RELATED --ctdir REPLY' ||
          /^-d 127\.0\.0\.1\/32 -p (udp|tcp) --dport 15053$/.test(match) ||
          /^-p ipv6-icmp --icmpv6-type neighbour-(solicitation|advertisement)$/.test(match),
        `unexpected ACCEPT ${rule.join(' ')}`,
      );
    }
  });
});

describe('boundary init-netns', () => {
  it('prints the commands with its defaults and runs none of them under --dry-run', async () => {
    const { code, stdout, stderr } = await runCli(['--dry-run']);
    assert.equal(code, 0, stderr);
    const expected = netnsCommands({ cidr: DEFAULT_SYNTHETIC_CIDR, uid: DEFAULT_BOUNDARY_UID, fence: true, dnsPort: DEFAULT_DNS_PORT });
    assert.equal(stdout, expected.map((s) => `${formatStep(s)}\n`).join(''));
    // A conditional step prints as a shell line that does the same: check || command.
    assert.match(stdout, /^iptables -w -t filter -C OUTPUT -j BOUNDARY-FENCE \|\| iptables -w -t filter -I OUTPUT 1 -j BOUNDARY-FENCE$/m);
  });

  it('passes --synthetic-cidr, --boundary-uid, --dns-port, --no-dns-redirect and --no-fence through', async () => {
    const { code, stdout } = await runCli(['--dry-run', '--synthetic-cidr', '127.77.0.0/16', '--boundary-uid', '123', '--no-fence', '--no-dns-redirect']);
    assert.equal(code, 0);
    assert.equal(stdout, 'ip route replace local 127.77.0.0/16 dev lo\n');
    const fenced = await runCli(['--dry-run', '--boundary-uid', '123', '--dns-port', '5353']);
    assert.match(fenced.stdout, /^iptables -w -t filter -A BOUNDARY-FENCE -m owner --uid-owner 123 -j ACCEPT$/m);
    assert.match(fenced.stdout, /^iptables -w -t nat -A BOUNDARY-DNS -p udp --dport 53 -m owner ! --uid-owner 123 -j DNAT --to-destination 127\.0\.0\.1:5353$/m);
  });

  it('refuses a bad CIDR, a bad uid or an unknown option with a usage error and runs nothing', async () => {
    for (const argv of [
      ['--dry-run', '--synthetic-cidr', 'nope'],
      ['--dry-run', '--boundary-uid', '-1'],
      ['--dry-run', '--boundary-uid', 'abc'],
      ['--dry-run', '--dns-port', '0'],
      ['--dry-run', '--dns-port', '65536'],
      ['--dry-run', '--dns-port'],
      ['--dry-run', '--bogus'],
    ]) {
      const { code, stdout, stderr } = await runCli(argv);
      assert.equal(code, 2, argv.join(' '));
      assert.equal(stdout, '');
      assert.match(stderr, /USAGE/);
    }
  });
});
