// Issue 29: every `pki init` CA had the subject `CN=boundary control CA`, so two CAs (two clusters, a CA made again)
// looked alike in every log line and verify error. Now each names its trust domain and a random id.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { initPki, issueToDir } from '../../src/pki/issue.js';

describe('issue 29: unique control CA subjects', () => {
  it('gives each CA O=<trust domain> and CN=boundary control CA <random id>, and its leaves that issuer', async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'boundary-issue-29-ca-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    const one = await initPki({ dir: join(root, 'one'), trustDomain: 'corp.test', now: Date.now });
    const two = await initPki({ dir: join(root, 'two'), trustDomain: 'corp.test', now: Date.now });
    assert.match(one.ca.subject, /^O=corp\.test, CN=boundary control CA [0-9a-f]{12}$/);
    assert.notEqual(one.ca.subject, two.ca.subject);
    const issued = await issueToDir({ dir: join(root, 'one'), out: join(root, 'leaf'), sandboxId: 'sb-1', now: Date.now });
    const leaf = new X509Certificate(await readFile(issued.files.cert));
    assert.equal(leaf.issuer.split('\n').join(', '), one.ca.subject);
    assert.equal(leaf.verify(new X509Certificate(one.ca.certPem).publicKey), true);
  });

  it('leaves out a trust domain too long for an O, and stays unique by its id', async (t) => {
    const root = await mkdtemp(join(tmpdir(), 'boundary-issue-29-ca-'));
    t.after(() => rm(root, { recursive: true, force: true }));
    const long = `${'a'.repeat(60)}.example`;
    const one = await initPki({ dir: join(root, 'one'), trustDomain: long, now: Date.now });
    const two = await initPki({ dir: join(root, 'two'), trustDomain: long, now: Date.now });
    assert.match(one.ca.subject, /^CN=boundary control CA [0-9a-f]{12}$/);
    assert.notEqual(one.ca.subject, two.ca.subject);
  });
});
