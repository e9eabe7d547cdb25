// bench/perf-split.mjs — where each process's CPU went, from a `perf record -g` of node processes started with
// --perf-basic-prof (bench/h2-pair.sh PERF=<dir> records one). Unlike --cpu-prof, perf samples the kernel, OpenSSL,
// the garbage collector and node's C++ as well, at a cost the processes barely notice.
//
// Three tables, each process a column (µs per request when given, else the share of its samples):
//   by area: every sample counted once, for the nearest JavaScript frame of the application on its stack (its folder
//     under dist/, or the package), with the node library, builtins, native code and syscalls it called counted with it;
//     samples with no such frame by what ran (GC, the event loop, TLS on read, ...). Code V8 inlined counts where it
//     was inlined: a small function of one folder can show under its caller's.
//   by kind: the same samples by the code that was running (kernel, OpenSSL, GC, V8 builtins, node C++, JavaScript);
//   in the kernel: the kernel's samples by area, as the first table counts them;
//   by function: every sample counted once, for the nearest JavaScript function on its stack (node's own included),
//     with the builtins and native code it called; the TOP (default 30) costliest in the first column.
//
// Usage: [TOP=<n>] node bench/perf-split.mjs <perf.data> <pid>=<name>[:<µs per request>] ...
import { execFileSync } from 'node:child_process';

const [data, ...procArgs] = process.argv.slice(2);
if (data === undefined || procArgs.length === 0) throw new Error('usage: node bench/perf-split.mjs <perf.data> <pid>=<name>[:<µs per request>] ...');
const procs = procArgs.map((arg) => {
  const [pid, rest = pid] = arg.split('=');
  const [name, us] = rest.split(':');
  return { pid, name, us: us === undefined ? undefined : Number(us), total: 0, areas: new Map(), kinds: new Map(), kernel: new Map(), functions: new Map() };
});
const byPid = new Map(procs.map((p) => [p.pid, p]));
/** Rows shown: those at least this share of some column's samples. */
const MIN_SHARE = 0.004;
/** Rows of the by-function table. */
const TOP = Number(process.env.TOP ?? '30');

const TLS_SYMBOL = /ssl|SSL|aes|gcm|EVP_|BIO_|tls1|tls13|ossl|OPENSSL|CRYPTO_|ghash|ERR_|NodeBIO|TLSWrap/;
const GC_SYMBOL = /Heap::|Scaveng|MarkCompact|Marking|Sweeper|Evacuat|GCTracer|RememberedSet|SlotSet|MemoryAllocator|MemoryReducer|PagedSpace|NewSpace|ConcurrentMark|Builtins_RecordWrite/;

function kindOf(sym, dso) {
  if (dso.includes('kernel')) return 'kernel';
  if (dso.startsWith('/tmp/perf-')) return sym.startsWith('RegExp:') ? 'regular expressions' : 'JavaScript';
  if (/libcrypto|libssl/.test(dso) || TLS_SYMBOL.test(sym)) return 'TLS (OpenSSL and its node wrapper)';
  if (GC_SYMBOL.test(sym)) return 'garbage collector';
  if (sym.startsWith('Builtins_')) return 'V8 builtins';
  if (sym.startsWith('v8::')) return 'V8 runtime';
  if (sym.startsWith('node::')) return 'node C++';
  if (sym.startsWith('uv_') || sym.startsWith('uv__')) return 'libuv';
  if (/libc\.so|libstdc|libm\.so|ld-linux/.test(dso)) return 'libc';
  return 'other native';
}

/** The application area of a JavaScript frame's symbol, or undefined for node's own library and anything else. */
function areaOf(sym) {
  const url = /\s(file:\/\/\S+?)(?::\d+)*$/.exec(sym)?.[1];
  if (url === undefined) return undefined;
  const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (pkg !== null) return `package ${pkg[1]}`;
  const dist = /\/dist\/(?:([^/]+)\/)?/.exec(url);
  if (dist !== null) return dist[1] ?? 'dist';
  const bench = /\/bench\/(.+)$/.exec(url);
  return bench === null ? url : `bench/${bench[1]}`;
}

/** What ran when no application frame is on the stack. */
function outsideOf(frames) {
  const leaf = frames[0];
  const kind = kindOf(leaf.sym, leaf.dso);
  // V8's own threads: TurboFan compiling hot functions, and the collector's parallel and concurrent work.
  if (frames.some((f) => f.sym.includes('OptimizingCompileDispatcher') || f.sym.includes('::Compiler::'))) return 'optimizing compiler';
  if (kind === 'garbage collector' || frames.some((f) => GC_SYMBOL.test(f.sym))) return 'garbage collector';
  if (frames.some((f) => f.sym.startsWith('JS:') && / node:/.test(f.sym))) return 'node library (no application frame)';
  if (frames.some((f) => TLS_SYMBOL.test(f.sym))) return 'TLS outside JavaScript';
  if (frames.some((f) => f.sym.startsWith('uv_run') || f.sym.startsWith('uv__'))) return 'event loop, outside JavaScript';
  return `other: ${kind}`;
}

const add = (map, key) => map.set(key, (map.get(key) ?? 0) + 1);
const text = execFileSync('perf', ['script', '-i', data, '-F', 'pid,ip,sym,dso'], { maxBuffer: 1 << 30, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
for (const block of text.split('\n\n')) {
  const lines = block.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) continue;
  const first = lines[0].trim().split(/\s+/);
  const proc = byPid.get(first[0]);
  if (proc === undefined || lines.length < 2) continue;
  // The sample's frames follow its pid, leaf first (a recording without -g has none and is not read).
  const frames = lines.slice(1).map((l) => {
    const m = /^\s*[0-9a-f]+\s+(.*?)\s+\(([^)]*)\)\s*$/.exec(l);
    return m === null ? { sym: '?', dso: '?' } : { sym: m[1].replace(/\+0x[0-9a-f]+$/, ''), dso: m[2] };
  });
  proc.total++;
  add(proc.kinds, kindOf(frames[0].sym, frames[0].dso));
  const app = frames.find((f) => f.sym.startsWith('JS:') && areaOf(f.sym) !== undefined);
  const area = app === undefined ? outsideOf(frames) : areaOf(app.sym);
  add(proc.areas, area);
  if (frames[0].dso.includes('kernel')) add(proc.kernel, area);
  const fn = frames.find((f) => f.sym.startsWith('JS:'));
  add(proc.functions, fn === undefined ? area : fn.sym.slice(3).replace(/file:\/\/\S*?\/(dist|bench|node_modules)\//, '$1/'));
}

function table(title, pick, top = Infinity) {
  const keys = new Set(procs.flatMap((p) => [...pick(p).keys()]));
  const value = (p, k) => ((pick(p).get(k) ?? 0) / Math.max(p.total, 1)) * (p.us ?? 100);
  const rows = [...keys].filter((k) => procs.some((p) => (pick(p).get(k) ?? 0) / Math.max(p.total, 1) >= MIN_SHARE));
  rows.sort((a, b) => value(procs[0], b) - value(procs[0], a));
  rows.length = Math.min(rows.length, top);
  const unit = procs.every((p) => p.us !== undefined) ? 'µs per request' : '% of samples';
  console.log(`\n${title} (${unit})`);
  console.log(`| | ${procs.map((p) => p.name).join(' | ')} |`);
  console.log(`|---|${procs.map(() => '---:').join('|')}|`);
  for (const k of rows) console.log(`| ${k} | ${procs.map((p) => value(p, k).toFixed(2)).join(' | ')} |`);
  const sum = (p) => [...pick(p).keys()].reduce((total, k) => total + value(p, k), 0);
  console.log(`| all | ${procs.map((p) => sum(p).toFixed(2)).join(' | ')} |`);
}

console.log(`samples: ${procs.map((p) => `${p.name} ${p.total}`).join(', ')}`);
table('By area, with what it called', (p) => p.areas);
table('By the code running', (p) => p.kinds);
table('In the kernel, by area (the syscalls each area made, and what they cost there)', (p) => p.kernel);
table(`By function, the nearest JavaScript frame with what it called (the first column's ${TOP} costliest)`, (p) => p.functions, TOP);
