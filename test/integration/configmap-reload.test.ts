import assert from 'node:assert/strict';
import { mkdtemp, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { buildResolver } from '../../src/app/cli/run.js';
import { parseConfig } from '../../src/app/config.js';
import { createFileCredentialSource } from '../../src/credentials/file-source.js';
import type { CredentialSet } from '../../src/credentials/set.js';
import { parsePolicy } from '../../src/policy/parse.js';
import { createPolicyStore, type PolicyStore } from '../../src/policy/store.js';
import { createPolicyFileWatcher } from '../../src/policy/policy-file.js';
import { policyYaml } from '../harness/control.js';
import { logSink } from '../harness/log-sink.js';
import { type ProjectedDir, projectedDir } from '../harness/projected-dir.js';
import { withinDeadline } from '../harness/waiters.js';

async function mounted(t: TestContext, files: Record<string, string>): Promise<ProjectedDir> {
  const volume = await projectedDir(files);
  t.after(() => volume.remove());
  return volume;
}

/** Resolves with the policy once the store holds `text`'s policy. */
function policyApplied(store: PolicyStore, text: string): Promise<number> {
  const hash = parsePolicy(text).hash;
  return withinDeadline(
    new Promise((resolve) => {
      const stop = store.subscribe((next) => {
        if (next.hash !== hash) return;
        stop();
        resolve(next.generation);
      });
    }),
    `policy ${hash}`,
  );
}

async function watchedPolicy(t: TestContext, path: string): Promise<PolicyStore> {
  const log = logSink();
  const store = createPolicyStore();
  const watcher = createPolicyFileWatcher({ path, store, sink: log.sink, logger: log.logger, onInvalid: 'keep' });
  await watcher.loadInitial();
  watcher.start();
  t.after(() => watcher.close());
  return store;
}

describe('boundary run --policy in a ConfigMap mount', () => {
  it('follows a kubelet ..data swap, and a swap without a content change makes no generation', async (t) => {
    const A = policyYaml('a.example.test');
    const B = policyYaml('b.example.test');
    const C = policyYaml('c.example.test');
    const volume = await mounted(t, { 'policy.yaml': A });
    const store = await watchedPolicy(t, volume.path('policy.yaml'));
    const first = store.current().generation;

    const toB = policyApplied(store, B);
    await volume.update({ 'policy.yaml': B });
    assert.equal(await toB, first + 1);
    // Same content, another key added to the ConfigMap: the kubelet swaps ..data all the same.
    await volume.update({ 'policy.yaml': B, 'notes.txt': 'unrelated' });
    const toC = policyApplied(store, C);
    await volume.update({ 'policy.yaml': C, 'notes.txt': 'unrelated' });
    assert.equal(await toC, first + 2);
  });

  it('keeps following in-place edits and editor-style renames of a plain file', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'boundary-policy-plain-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'policy.yaml');
    await writeFile(path, policyYaml('a.example.test'));
    const store = await watchedPolicy(t, path);
    const edited = policyYaml('b.example.test');
    const inPlace = policyApplied(store, edited);
    await writeFile(path, edited);
    await inPlace;
    const renamed = policyYaml('c.example.test');
    const byRename = policyApplied(store, renamed);
    await writeFile(join(dir, '.policy.yaml.swp'), renamed);
    await rename(join(dir, '.policy.yaml.swp'), path);
    await byRename;
  });
});

describe('boundary run --hosts in a ConfigMap mount', () => {
  it('answers the next lookup from the swapped file, drops cached answers, and keeps the last good table on a broken read', async (t) => {
    const volume = await mounted(t, { hosts: '127.0.0.1 api.example.test\n' });
    const log = logSink();
    // Port 1 never answers: every name here must come from the hosts file.
    const config = parseConfig({ policyFile: volume.path('policy.yaml'), upstreamDns: '127.0.0.1:1', hostsFile: volume.path('hosts') });
    const dns = await buildResolver(config, Date.now, log.logger);
    t.after(() => dns.close());
    const resolve = async () => {
      const result = await dns.resolver.resolve('api.example.test', 4);
      return result.ok ? result.addresses : result.failure;
    };
    assert.deepEqual(await resolve(), ['127.0.0.1']);
    assert.notEqual(dns.resolver.cached?.('api.example.test', 4), undefined, 'the answer is cached');

    const reloaded = withinDeadline(new Promise((done) => dns.hosts?.subscribe(done)), 'hosts reload');
    await volume.update({ hosts: '127.0.0.2 api.example.test\n' });
    await reloaded;
    assert.equal(dns.resolver.cached?.('api.example.test', 4), undefined, 'the old answer is gone');
    assert.deepEqual(await resolve(), ['127.0.0.2']);

    await unlink(volume.path('hosts'));
    assert.equal(await dns.hosts?.reload(), false);
    assert.ok(log.lines().some((line) => line.includes('hosts file reload failed')));
    assert.deepEqual(await resolve(), ['127.0.0.2']);
  });
});

describe('boundary run --credentials in a Secret mount', () => {
  function changed(source: { subscribe(l: (next: CredentialSet) => void): () => void }): Promise<CredentialSet> {
    return withinDeadline(
      new Promise((resolve) => {
        const stop = source.subscribe((next) => {
          stop();
          resolve(next);
        });
      }),
      'credentials change',
    );
  }

  it('follows swaps of the credentials file and of a value_from.file that is itself a Secret mount', async (t) => {
    const secret = await mounted(t, { token: 'tok-one\n' });
    const yaml = (extra: string) =>
      `providers:\n  api:\n    env:\n      API_TOKEN: { value_from: { file: ${secret.path('token')} } }\n${extra}    endpoints:\n      - { host: api.example.test, port: 443 }\n`;
    const volume = await mounted(t, { 'credentials.yaml': yaml('') });
    const source = await createFileCredentialSource({ path: volume.path('credentials.yaml'), env: { OTHER: 'other-1' }, watch: true });
    t.after(() => source.close());
    const token = (set: CredentialSet) => set.providers.get('api')?.keys.get('API_TOKEN')?.reveal();
    const other = (set: CredentialSet) => set.providers.get('api')?.keys.get('OTHER')?.reveal();
    assert.equal(token(source.current()), 'tok-one');

    const rotated = changed(source);
    await secret.update({ token: 'tok-two\n' });
    assert.equal(token(await rotated), 'tok-two');

    const edited = changed(source);
    await volume.update({ 'credentials.yaml': yaml('      OTHER: { value_from: { env: OTHER } }\n') });
    const next = await edited;
    assert.equal(other(next), 'other-1');
    assert.equal(token(next), 'tok-two');
    assert.equal(next.revision, 3, 'one revision per content change');
  });
});
