// Event uids (telemetry/event-uid.ts): random version-4 UUIDs in crypto.randomUUID()'s text form as bytes, fresh across
// batches, each unchanged until a batch later.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createEventUids, EVENT_UIDS_PER_BATCH, uidText } from '../../src/telemetry/event-uid.js';

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('every uid is a lower-case v4 UUID with its variant bits, and none repeats over several batches', () => {
  const uid = createEventUids();
  const seen = new Set<string>();
  const n = EVENT_UIDS_PER_BATCH * 4 + 3;
  for (let i = 0; i < n; i++) {
    const u = uidText(uid());
    assert.match(u, V4);
    seen.add(u);
  }
  assert.equal(seen.size, n);
});

test("a uid's bytes stay as they were until a batch more is taken, and its text after that", () => {
  const uid = createEventUids();
  const first = uid();
  const text = uidText(first);
  for (let i = 0; i < EVENT_UIDS_PER_BATCH - 1; i++) assert.notEqual(uidText(uid()), text);
  assert.equal(uidText(first), text);
  for (let i = 0; i < EVENT_UIDS_PER_BATCH; i++) uid();
  assert.notEqual(uidText(first), text);
  assert.match(text, V4);
});

test('two sources give different uids', () => {
  assert.notEqual(uidText(createEventUids()()), uidText(createEventUids()()));
});

test('every hex digit shows up in every free position', () => {
  // 2,000 uids: a position stuck at one value (a slip in the byte-to-text loop) would show here.
  const uid = createEventUids();
  const digits = Array.from({ length: 36 }, () => new Set<string>());
  for (let i = 0; i < 2000; i++) {
    const u = uidText(uid());
    for (let j = 0; j < 36; j++) digits[j]?.add(u[j] as string);
  }
  for (let j = 0; j < 36; j++) {
    const expected = [8, 13, 18, 23].includes(j) ? 1 : j === 14 ? 1 : j === 19 ? 4 : 16;
    assert.equal(digits[j]?.size, expected, `position ${j}`);
  }
});
