// Squids the tests start at once each get their own shared-memory segments, and a set that fails to start leaves
// none running. Squid names its /dev/shm segments after its service name; under one name, two squids starting
// together could both remove the old segments and then both create them, and the second died with "File exists".
// The CI run that hit it then hung: the squids that had started were never closed.
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { test } from 'node:test';
import { startSquids } from '../harness/squid.js';

const metadataSegments = async (): Promise<Set<string>> =>
  new Set((await readdir('/dev/shm')).filter((name) => name.endsWith('-cf__metadata.shm')));

test('squids started at once each have their own shared-memory segments, removed when they stop', async () => {
  const before = await metadataSegments();
  const squids = await startSquids([{ ports: [443] }, { ports: [443] }, { ports: [443] }]);
  try {
    const added = [...(await metadataSegments())].filter((name) => !before.has(name));
    assert.equal(added.length, 3, `segments added by three squids: ${JSON.stringify(added)}`);
  } finally {
    await Promise.all(squids.map((s) => s.close()));
  }
  assert.deepEqual(await metadataSegments(), before);
});

test('when one squid of a set fails to start, the others are stopped', async () => {
  const before = await metadataSegments();
  const bad = { certPem: 'not a certificate', keyPem: 'not a key' };
  await assert.rejects(startSquids([{ ports: [443] }, { ports: [443], tls: bad }, { ports: [443] }]), /squid did not start/);
  assert.deepEqual(await metadataSegments(), before);
});
