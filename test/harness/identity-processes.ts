// Real processes holding real loopback connections, for the binary identity tests: a server on 127.0.0.1 port 0
// that hands over each accepted socket, and clients (bash /dev/tcp, python3, a copied executable) that connect,
// say `ready` on stdout and hold the connection until their stdin closes. Every child is killed in teardown.

import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { realpathSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { createProcIdentitySource } from '../../src/identity/proc-source.js';
import type { IdentitySource, LookupRequest } from '../../src/identity/source.js';
import { waiterList } from './waiters.js';

/** Bounds a hang only: a client process's start, which a loaded host stretches far past its usual moment. */
export const CLIENT_READY_TIMEOUT_MS = 60_000;
/**
 * Bounds a hang only: the lookup timeout of the identity sources tests build. The product's
 * IDENTITY_LOOKUP_TIMEOUT_MS would turn a /proc walk slowed by a loaded host into a 'timeout' failure; tests of the
 * timeout itself set a short one on a source that never answers.
 */
export const TEST_IDENTITY_LOOKUP_TIMEOUT_MS = 60_000;

/** /proc read on a worker thread, as boundary reads it, with the test's lookup timeout. */
export function testProcSource(options: { now?: () => number; procRoot?: string } = {}): IdentitySource {
  return createProcIdentitySource({ now: Date.now, ...options, timeoutMs: TEST_IDENTITY_LOOKUP_TIMEOUT_MS });
}

/** The kernel's path of a program: what /proc/<pid>/exe names. */
export const realExe = (path: string): string => realpathSync(path);

export interface AcceptingServer {
  readonly port: number;
  /** An accepted connection not handed out before. */
  next(): Promise<Socket>;
  close(): Promise<void>;
}

export async function acceptingServer(host = '127.0.0.1'): Promise<AcceptingServer> {
  const accepted = waiterList<Socket>();
  const server: Server = createServer((socket) => {
    socket.on('error', () => socket.destroy());
    accepted.push(socket);
  });
  server.listen(0, host);
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  const taken = new Set<Socket>();
  return {
    port,
    next() {
      // Claimed inside the predicate: two waiters never take the same connection.
      const claim = (s: Socket): boolean => !taken.has(s) && taken.add(s) !== undefined;
      return accepted.waitFor(claim, CLIENT_READY_TIMEOUT_MS, 'accepted connection');
    },
    async close() {
      for (const socket of accepted.items) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What an identity source is asked for the connection `socket` accepted. */
export function lookupFor(socket: Socket, paths: readonly string[] = []): LookupRequest {
  return {
    client: { ip: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 },
    proxy: { ip: socket.localAddress ?? '', port: socket.localPort ?? 0 },
    paths,
  };
}

/** bash: open fd 3 to host:port, say ready, hold it until stdin closes. `exe` may be a copied bash. */
export function bashHolding(exe: string, port: number, extra = ''): string[] {
  return [exe, '-c', `exec 3<>/dev/tcp/127.0.0.1/${port}; ${extra}echo ready; read -r _`];
}

export interface HeldClient {
  readonly child: ChildProcess;
  readonly socket: Socket;
  stop(): void;
}

/** Spawns `argv`, waits for `ready` and the accepted connection (start clients one at a time to pair them right). */
export async function holdClient(t: { after(fn: () => void): void }, server: AcceptingServer, argv: readonly string[]): Promise<HeldClient> {
  const accepted = server.next();
  // Its own process group: stop() ends whatever it started too (a `sleep` sharing its socket).
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'], detached: true });
  const stop = (): void => {
    child.stdin?.destroy();
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
  t.after(stop);
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${argv[0]} did not say ready: ${out}`)), CLIENT_READY_TIMEOUT_MS);
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${argv[0]} exited with ${code} before ready: ${out}`));
    });
  });
  return { child, socket: await accepted, stop };
}
