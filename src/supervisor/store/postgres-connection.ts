// The PostgreSQL store's connections: a bounded pool for statements and transactions, and one LISTEN connection
// that reconnects with backoff when it drops. Every failure becomes STORE_UNAVAILABLE naming the operation; the
// connection string (it may carry a password) is never logged. Knows no table and no StoreChange.

import pg from 'pg';
import { BoundaryError, isBoundaryError } from '../../shared/errors.js';
import type { Logger } from '../../telemetry/logger.js';
import type { Row } from './postgres-schema.js';

/** Connections each replica keeps for queries (the LISTEN connection is one more). */
const DEFAULT_POOL_SIZE = 4;
/** The first reconnect of a dropped LISTEN connection waits this long, doubling up to the maximum. */
const LISTEN_RETRY_MIN_MS = 100;
const LISTEN_RETRY_MAX_MS = 5_000;
/** A connection attempt that takes longer fails, so start() and queries never hang on an unreachable server. */
export const CONNECT_TIMEOUT_MS = 10_000;
/** A statement that takes longer is cancelled by the server. */
const STATEMENT_TIMEOUT_MS = 30_000;

interface PostgresConnection {
  readonly pool: pg.Pool;
  /** `err` as the store's error: STORE_UNAVAILABLE saying what failed, unless it already is a store error. */
  failure(what: string, err: unknown): BoundaryError;
  query(what: string, text: string, values?: unknown[]): Promise<pg.QueryResult<Row>>;
  /** Runs `body` between BEGIN and COMMIT on one pooled connection; rolls back when it throws. */
  transaction<T>(what: string, body: (db: pg.PoolClient) => Promise<T>): Promise<T>;
  /** Opens the LISTEN connection; from then on every payload on `channel` goes to `onPayload`, across reconnects. */
  listen(): Promise<void>;
  /** Ends the listener and the pool; safe to call more than once. */
  close(): Promise<void>;
}

export function createPostgresConnection(options: {
  readonly connectionString: string;
  readonly logger: Logger;
  readonly poolSize?: number | undefined;
  readonly channel: string;
  readonly onPayload: (payload: string | undefined) => void;
}): PostgresConnection {
  const { connectionString, logger, channel, onPayload } = options;
  const poolSize = options.poolSize ?? DEFAULT_POOL_SIZE;
  if (!Number.isInteger(poolSize) || poolSize < 1) {
    const message = `poolSize must be a positive integer, not ${poolSize}`;
    throw new BoundaryError('CONFIG_INVALID', message, { issues: [{ code: 'CONFIG_INVALID', path: 'poolSize', message }] });
  }
  const clientConfig = { connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, statement_timeout: STATEMENT_TIMEOUT_MS };
  const pool = new pg.Pool({ ...clientConfig, max: poolSize });
  // An idle pooled connection that breaks emits here; without a handler it would crash the process.
  pool.on('error', (err) => logger.warn({ err: err.message }, 'supervisor store: an idle PostgreSQL connection failed'));
  let listener: pg.Client | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let retryDelayMs = LISTEN_RETRY_MIN_MS;
  let closing: Promise<void> | undefined;

  function failure(what: string, err: unknown): BoundaryError {
    if (isBoundaryError(err) && (err.code === 'STORE_UNAVAILABLE' || err.code === 'STORE_STATE_INVALID')) return err;
    const message = err instanceof Error ? err.message : String(err);
    return new BoundaryError('STORE_UNAVAILABLE', `supervisor store (postgres): ${what} failed: ${message}`, { cause: err });
  }

  async function query(what: string, text: string, values?: unknown[]): Promise<pg.QueryResult<Row>> {
    try {
      return await pool.query<Row>(text, values);
    } catch (err) {
      throw failure(what, err);
    }
  }

  async function transaction<T>(what: string, body: (db: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw failure(what, err);
    }
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await body(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch((rollbackErr: Error) => {
        broken = rollbackErr;
      });
      throw failure(what, err);
    } finally {
      // A connection that could not roll back is destroyed, not handed to the next caller.
      client.release(broken);
    }
  }

  async function listen(): Promise<void> {
    const client = new pg.Client(clientConfig);
    client.on('notification', (message) => {
      if (message.channel === channel) onPayload(message.payload);
    });
    client.on('error', (err) => lost(client, err));
    client.on('end', () => lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${channel}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (closing !== undefined) {
      await client.end();
      return;
    }
    listener = client;
    retryDelayMs = LISTEN_RETRY_MIN_MS;
  }

  function lost(client: pg.Client, err?: Error): void {
    if (closing !== undefined || listener !== client) return;
    listener = undefined;
    client.end().catch(() => undefined);
    logger.warn(
      { err: err?.message, retryInMs: retryDelayMs },
      'supervisor store: the PostgreSQL notification connection dropped; changes from other replicas are missed until it is back',
    );
    reconnect();
  }

  function reconnect(): void {
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      listen().then(
        () => logger.info('supervisor store: the PostgreSQL notification connection is back'),
        (err: Error) => {
          retryDelayMs = Math.min(retryDelayMs * 2, LISTEN_RETRY_MAX_MS);
          logger.warn({ err: err.message, retryInMs: retryDelayMs }, 'supervisor store: reconnecting for notifications failed');
          if (closing === undefined) reconnect();
        },
      );
    }, retryDelayMs);
  }

  return {
    pool,
    failure,
    query,
    transaction,
    listen,
    close() {
      closing ??= (async () => {
        if (retryTimer !== undefined) clearTimeout(retryTimer);
        await listener?.end().catch(() => undefined);
        listener = undefined;
        await pool.end().catch(() => undefined);
      })();
      return closing;
    },
  };
}
