import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';

// The "who may import whom" rules of STYLE.md section 2 (and each src/ folder's README.md), checked on every
// import of every src/**/*.ts file: static, re-exports, side-effect and dynamic import().

const SRC = resolve(import.meta.dirname, '../../src');

interface Edge {
  /** Importing file, relative to src/ (`proxy/connect.ts`). */
  readonly from: string;
  /** Imported file, relative to src/ with `.ts` (`policy/decide.ts`). */
  readonly to: string;
  /** Erased at runtime: `import type`, `export type`, or every named specifier is `type`. */
  readonly typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

function isTypeOnly(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isExportDeclaration(node)) {
    if (node.isTypeOnly) return true;
    const clause = node.exportClause;
    return clause !== undefined && ts.isNamedExports(clause) && clause.elements.length > 0 && clause.elements.every((e) => e.isTypeOnly);
  }
  const clause = node.importClause;
  if (clause === undefined) return false;
  if (clause.isTypeOnly) return true;
  if (clause.name !== undefined) return false;
  const bindings = clause.namedBindings;
  return bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
}

function importsOf(file: string): Edge[] {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
  const from = relative(SRC, file);
  const edges: Edge[] = [];
  const add = (specifier: string, typeOnly: boolean): void => {
    if (!specifier.startsWith('.')) return;
    const to = relative(SRC, resolve(dirname(file), specifier)).replace(/\.js$/, '.ts');
    edges.push({ from, to, typeOnly });
  };
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, isTypeOnly(node));
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      if (arg !== undefined && ts.isStringLiteral(arg)) add(arg.text, false);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text, true);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return edges;
}

const FILES = sourceFiles(SRC);
const EDGES = FILES.flatMap(importsOf);

function inFolder(path: string, folder: string): boolean {
  return path.startsWith(`${folder}/`);
}

/** Every import out of `folder` into one of `forbidden` (folders, or files such as `boundary.ts`). */
function violations(folder: string, forbidden: readonly string[]): string[] {
  return EDGES.filter((e) => inFolder(e.from, folder) && forbidden.some((f) => (f.endsWith('.ts') ? e.to === f : inFolder(e.to, f)))).map(
    (e) => `${e.from} -> ${e.to}`,
  );
}

describe('layering (STYLE.md section 2)', () => {
  it('reads the imports of every source file', () => {
    assert.ok(FILES.length > 100, `only ${FILES.length} files under src/`);
    assert.ok(EDGES.some((e) => e.from === 'chain/timing.ts' && e.to === 'policy/decide.ts'), 'a known import was not seen');
    assert.ok(EDGES.some((e) => e.from === 'proxy/context.ts' && e.to === 'tls/intercept.ts' && e.typeOnly), 'a known type import was not seen');
  });

  it('resolves every relative import to a file that exists', () => {
    const known = new Set(FILES.map((f) => relative(SRC, f)));
    assert.deepEqual(
      EDGES.filter((e) => !known.has(e.to)).map((e) => `${e.from} -> ${e.to}`),
      [],
    );
  });

  it('policy/ imports nothing from the adapters, credentials, control or the protocol folders', () => {
    assert.deepEqual(violations('policy', ['proxy', 'dns', 'control', 'credentials', 'http1', 'websocket', 'tls', 'supervisor', 'identity', 'app', 'chain']), []);
  });

  it('identity/ reads /proc and never decides: nothing from the adapters or protocol folders, from policy/ only the claim types', () => {
    assert.deepEqual(
      violations('identity', ['proxy', 'chain', 'dns', 'control', 'credentials', 'http1', 'websocket', 'tls', 'supervisor', 'pki', 'app']),
      [],
    );
    assert.deepEqual(
      EDGES.filter((e) => inFolder(e.from, 'identity') && inFolder(e.to, 'policy') && e.to !== 'policy/binary-identity.ts').map((e) => `${e.from} -> ${e.to}`),
      [],
    );
    assert.deepEqual(
      EDGES.filter((e) => inFolder(e.from, 'identity') && inFolder(e.to, 'telemetry') && !e.typeOnly).map((e) => `${e.from} -> ${e.to}`),
      [],
    );
  });

  it('net/ is pure address and name code below policy/: nothing from policy/, the adapters, control, credentials or telemetry', () => {
    assert.deepEqual(
      violations('net', ['policy', 'proxy', 'chain', 'dns', 'control', 'supervisor', 'credentials', 'telemetry', 'http1', 'websocket', 'tls', 'pki', 'app']),
      [],
    );
    // Outside net/ only shared/: the error catalogue, the file watcher, the reload queue.
    assert.deepEqual(
      EDGES.filter((e) => inFolder(e.from, 'net') && !inFolder(e.to, 'net') && !inFolder(e.to, 'shared')).map((e) => `${e.from} -> ${e.to}`),
      [],
    );
  });

  it('telemetry/ is a leaf: from policy/ and net/ it imports only types, from shared/ anything, and from nowhere else anything', () => {
    const out = EDGES.filter((e) => inFolder(e.from, 'telemetry') && !inFolder(e.to, 'telemetry') && !inFolder(e.to, 'shared'));
    assert.deepEqual(
      out.filter((e) => !((inFolder(e.to, 'policy') || inFolder(e.to, 'net')) && e.typeOnly)).map((e) => `${e.from} -> ${e.to}`),
      [],
    );
  });

  it('shared/ is the bottom: it imports nothing outside its folder', () => {
    assert.deepEqual(
      EDGES.filter((e) => inFolder(e.from, 'shared') && !inFolder(e.to, 'shared')).map((e) => `${e.from} -> ${e.to}`),
      [],
    );
  });

  it('app/ is the top: no file outside it imports it', () => {
    assert.deepEqual(
      EDGES.filter((e) => !inFolder(e.from, 'app') && inFolder(e.to, 'app')).map((e) => `${e.from} -> ${e.to}`),
      [],
    );
    assert.deepEqual(
      FILES.map((f) => relative(SRC, f)).filter((f) => !f.includes('/')),
      [],
      'every source file lives in a folder that says what it owns',
    );
  });

  it('chain/ decides requests and never touches the adapters: nothing from proxy/ but types, nothing from dns/, control/, supervisor/ or app/', () => {
    assert.deepEqual(violations('chain', ['dns', 'control', 'supervisor', 'app']), []);
    assert.deepEqual(
      EDGES.filter((e) => inFolder(e.from, 'chain') && inFolder(e.to, 'proxy') && !e.typeOnly).map((e) => `${e.from} -> ${e.to}`),
      [],
    );
  });

  it('proxy/ holds the adapters: it runs the chain and never imports dns/, control/, supervisor/ or app/', () => {
    assert.deepEqual(violations('proxy', ['dns', 'control', 'supervisor', 'app']), []);
  });

  it('dns/ serves names and never imports the adapters, the chain, control/, supervisor/ or app/', () => {
    assert.deepEqual(violations('dns', ['proxy', 'chain', 'control', 'supervisor', 'app']), []);
  });

  it('folders form a DAG: no folder imports one that imports it back, directly or through others (runtime imports)', () => {
    const graph = new Map<string, Set<string>>();
    const folder = (path: string): string => path.split('/')[0] as string;
    for (const e of EDGES) {
      if (e.typeOnly || folder(e.from) === folder(e.to)) continue;
      const out = graph.get(folder(e.from)) ?? new Set<string>();
      out.add(folder(e.to));
      graph.set(folder(e.from), out);
    }
    // A cycle is a folder that reaches itself.
    const cycles: string[] = [];
    for (const start of graph.keys()) {
      const seen = new Set<string>();
      const stack = [...(graph.get(start) ?? [])];
      while (stack.length > 0) {
        const next = stack.pop() as string;
        if (next === start) {
          cycles.push(start);
          break;
        }
        if (seen.has(next)) continue;
        seen.add(next);
        stack.push(...(graph.get(next) ?? []));
      }
    }
    assert.deepEqual(cycles, []);
  });

  it('supervisor/ never imports boundary.ts, the adapters or the protocol folders', () => {
    assert.deepEqual(violations('supervisor', ['app', 'proxy', 'chain', 'dns', 'http1', 'websocket', 'tls']), []);
  });

  it('supervisor/ takes from control/ only the shared protocol (messages, framing, wire constants), never the client', () => {
    const shared = new Set(['control/messages.ts', 'control/message-fields.ts', 'control/ndjson.ts', 'control/protocol.ts']);
    assert.deepEqual(
      EDGES.filter((e) => inFolder(e.from, 'supervisor') && inFolder(e.to, 'control') && !shared.has(e.to)).map((e) => `${e.from} -> ${e.to}`),
      [],
    );
  });

  it('control/client.ts never imports supervisor/', () => {
    assert.deepEqual(
      EDGES.filter((e) => e.from === 'control/client.ts' && inFolder(e.to, 'supervisor')).map((e) => e.to),
      [],
    );
  });

  it('http1/ is a codec and client: nothing from proxy/, websocket/, tls/, policy/ or credentials/', () => {
    assert.deepEqual(violations('http1', ['proxy', 'websocket', 'tls', 'policy', 'credentials']), []);
  });

  it('http2/ is a codec and client like http1/: nothing from proxy/, websocket/, tls/, policy/ or credentials/', () => {
    assert.deepEqual(violations('http2', ['proxy', 'websocket', 'tls', 'policy', 'credentials']), []);
  });

  it('http1/ imports nothing from http2/', () => {
    assert.deepEqual(violations('http1', ['http2']), []);
  });

  it('websocket/ imports nothing from proxy/, http1/ or tls/', () => {
    assert.deepEqual(violations('websocket', ['proxy', 'http1', 'tls']), []);
  });

  it('tls/ imports nothing from proxy/, http1/, http2/ or websocket/', () => {
    assert.deepEqual(violations('tls', ['proxy', 'http1', 'http2', 'websocket']), []);
  });

  it('graphql/ and jsonrpc/ are pure codecs: out of their folder they import only policy/ types and json/', () => {
    for (const folder of ['graphql', 'jsonrpc']) {
      const out = EDGES.filter((e) => inFolder(e.from, folder) && !inFolder(e.to, folder) && !inFolder(e.to, 'json'));
      assert.deepEqual(out.filter((e) => !(inFolder(e.to, 'policy') && e.typeOnly)).map((e) => `${e.from} -> ${e.to}`), []);
    }
  });

  it('json/ is a leaf: it imports nothing outside its folder', () => {
    assert.deepEqual(
      EDGES.filter((e) => inFolder(e.from, 'json') && !inFolder(e.to, 'json')).map((e) => `${e.from} -> ${e.to}`),
      [],
    );
  });

  it('has no index.ts barrels', () => {
    assert.deepEqual(
      FILES.map((f) => relative(SRC, f)).filter((f) => f === 'index.ts' || f.endsWith('/index.ts')),
      [],
    );
  });
});
