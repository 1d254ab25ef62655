import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import * as schema from './schema.ts';

export type Schema = typeof schema;
export type Database = NodePgDatabase<Schema>;

/** Options of {@link createDb}. */
export interface CreateDbOptions {
  /** Pool size. @defaultValue 10 */
  max?: number;
  /** Name in pg_stat_activity. */
  applicationName?: string;
  /** Time to wait for a connection, in ms. @defaultValue 5000 */
  connectionTimeoutMs?: number;
  /** Server-side statement timeout, in ms; 0 disables it. @defaultValue 30000 */
  statementTimeoutMs?: number;
}

/** A handle on Postgres: the drizzle instance, its pool, and `close()`. */
export interface Db {
  db: Database;
  pool: pg.Pool;
  close(): Promise<void>;
}

// numeric (1700) must stay text: exact decimals, never floats. pg already returns it as a string; int8 (20) too.
export function createDb(url: string, options: CreateDbOptions = {}): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 10,
    application_name: options.applicationName,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 5000,
    statement_timeout: options.statementTimeoutMs ?? 30_000,
    idleTimeoutMillis: 30_000,
  });
  // An idle client that loses its server emits 'error' on the pool; without a listener that kills the process.
  pool.on('error', () => {});
  // A checked-out client (a drizzle transaction holds one between its queries) has no pool listener: when the server
  // goes away (restart, failover) it emits 'error' and, unheard, kills the process. Its queries still fail with the
  // error, which the caller handles, and the pool drops the dead client on release.
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = drizzle(pool, { schema });
  let closed = false;
  return {
    db,
    pool,
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}
