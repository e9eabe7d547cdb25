// Where a heap snapshot's bytes are, by kind: node type, and for V8's internal objects (code, hidden, array) the
// object's name ("system / SharedFunctionInfo", "(bytecode)"…), so builds can be compared module overhead by kind.
//   node bench/bundle/heap-kinds.mjs A.heapsnapshot [B.heapsnapshot …]   (prints KB per kind, one column per file)

import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const ROWS = 40;

function kinds(file) {
  const snap = JSON.parse(readFileSync(file, 'utf8'));
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const out = new Map();
  const add = (key, bytes) => out.set(key, (out.get(key) ?? 0) + bytes);
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + typeAt]];
    const size = snap.nodes[i + sizeAt];
    // Scripts are named by their URL, which differs between builds.
    const name = snap.strings[snap.nodes[i + nameAt]].replace(/^file:\/\/.*/, '(file: URL)');
    // Strings by type only; internal objects by their name; user objects by type.
    add(['code', 'hidden', 'array', 'object shape'].includes(type) ? `${type}: ${name.slice(0, 48)}` : type, size);
    add('total', size);
  }
  return out;
}

const files = process.argv.slice(2);
const all = files.map(kinds);
const keys = [...new Set(all.flatMap((m) => [...m.keys()]))].sort((a, b) => (all[0].get(b) ?? 0) - (all[0].get(a) ?? 0));
const kb = (n) => String(Math.round((n ?? 0) / 1024)).padStart(9);
process.stdout.write(`${'KB'.padEnd(56)}${files.map((f) => basename(f).slice(0, 9).padStart(9)).join('')}\n`);
for (const key of keys.slice(0, ROWS)) process.stdout.write(`${key.padEnd(56)}${all.map((m) => kb(m.get(key))).join('')}\n`);
