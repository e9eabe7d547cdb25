// `boundary identity serve` (docs/identity.md#the-identity-socket): answers lookups on a unix socket from its
// IdentitySource, so the privilege to read other uids' /proc entries lives in a small process that parses no
// network traffic, while boundary keeps no capabilities. The socket file is mode 0660: only its owner (root) and
// its group (boundary's gid, runAsGroup in the manifest) may connect.

import { lstat, chmod, unlink } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { BoundaryError } from '../shared/errors.js';
import type { Logger } from '../telemetry/logger.js';
import type { IdentitySource } from './source.js';
import { decodeRequest, encodeLine, lineSplitter, type WireAnswer } from './wire.js';

/** Clients at once: boundary holds one (and one more while it reconnects); anything beyond is refused. */
export const MAX_IDENTITY_CLIENTS = 8;
/** Lookups a client may have in flight; beyond it the client is cut off (boundary bounds its own at MAX_PENDING_LOOKUPS). */
export const MAX_CLIENT_LOOKUPS = 2_048;
/** The socket file's mode: owner and group only. */
const SOCKET_MODE = 0o660;

export interface IdentityServer {
  start(): Promise<void>;
  close(): Promise<void>;
}

export function createIdentityServer(options: { readonly socketPath: string; readonly source: IdentitySource; readonly logger: Logger }): IdentityServer {
  const { socketPath, source, logger } = options;
  const clients = new Set<Socket>();
  let server: Server | undefined;

  function serve(socket: Socket): void {
    if (clients.size >= MAX_IDENTITY_CLIENTS) {
      logger.warn({ clients: clients.size }, 'identity client refused: too many clients');
      socket.destroy();
      return;
    }
    clients.add(socket);
    let inFlight = 0;
    socket.on('close', () => clients.delete(socket));
    socket.on('error', () => socket.destroy());
    const drop = (why: string): void => {
      logger.warn({ why }, 'identity client dropped');
      socket.destroy();
    };
    socket.on(
      'data',
      lineSplitter(
        (line) => {
          let request: ReturnType<typeof decodeRequest>;
          try {
            request = decodeRequest(line);
          } catch (err) {
            drop(err instanceof Error ? err.message : String(err));
            return;
          }
          if (++inFlight > MAX_CLIENT_LOOKUPS) {
            drop(`more than ${MAX_CLIENT_LOOKUPS} lookups in flight`);
            return;
          }
          void source.lookup(request).then((result) => {
            inFlight--;
            if (!socket.destroyed) socket.write(encodeLine({ id: request.id, result } satisfies WireAnswer));
          });
        },
        () => drop('message too large'),
      ),
    );
  }

  return {
    async start() {
      // A socket left by a previous run is replaced; any other file at the path is an operator's mistake.
      const existing = await lstat(socketPath).catch(() => undefined);
      if (existing !== undefined && !existing.isSocket()) throw new BoundaryError('CONFIG_INVALID', `${socketPath} exists and is not a socket`);
      if (existing !== undefined) await unlink(socketPath);
      await source.start();
      const s = createServer(serve);
      server = s;
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.listen(socketPath, () => {
          s.off('error', reject);
          resolve();
        });
      });
      await chmod(socketPath, SOCKET_MODE);
      logger.info({ socket: socketPath }, 'identity server listening');
    },
    async close() {
      const s = server;
      server = undefined;
      for (const client of clients) client.destroy();
      if (s !== undefined) await new Promise<void>((resolve) => s.close(() => resolve()));
      await source.close();
    },
  };
}
