/** The benchmark's own database on the shared Postgres: created and migrated at the start, dropped at the end. */
import { randomBytes } from 'node:crypto';
import { migrateDatabase } from '@mcb/core/db';
import { BENCH_MERCHANT_NO } from './callbacks.ts';
import pg from 'pg';

export interface BenchDatabase {
  url: string;
  name: string;
  drop: () => Promise<void>;
}

const DEFAULT_SERVER = 'postgres://postgres@127.0.0.1:5432/postgres';

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function adminQuery(serverUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * Create `mcb_bench_<time>_<random>` and apply the migrations (migrateDatabase creates it). Rows the bench writes
 * without a merchant number are the bench merchant's.
 */
export async function createBenchDatabase(
  serverUrl = process.env.BENCH_POSTGRES_URL ?? DEFAULT_SERVER,
): Promise<BenchDatabase> {
  const name = `mcb_bench_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const url = withDatabase(serverUrl, name);
  await migrateDatabase(url, { defaultMerchantNo: BENCH_MERCHANT_NO });
  return { url, name, drop: () => adminQuery(serverUrl, `drop database if exists "${name}" with (force)`) };
}

/**
 * Empty the pipeline's tables between phases. The trail's tables refuse TRUNCATE for everyone (migration 0007); the
 * bench connects as a superuser, whose replica role skips that trigger for this one transaction.
 */
export async function truncateAll(pool: pg.Pool): Promise<void> {
  await pool.query(
    'begin; set local session_replication_role = replica; truncate order_events, ledger_entries, callback_receipts, reviews, orders restart identity cascade; commit',
  );
}

/**
 * Register `count` pending pay-ins in one statement (server-side generate_series, no client round trips):
 * merchant order numbers `${prefix}${i}`, amount `amount` INR, in the name of `merchantNo` (the bench's merchant
 * by default).
 */
export async function insertPendingPayins(
  pool: pg.Pool,
  prefix: string,
  count: number,
  amount: string,
  from = 1,
  merchantNo = BENCH_MERCHANT_NO,
): Promise<void> {
  await pool.query(
    `insert into orders (merchant_no, merchant_order_no, kind, currency, amount, request_hash)
     select $5, $1 || g, 'payin', 'INR', $2::numeric, md5($1 || g)
       from generate_series($3::int, $4::int) g`,
    [prefix, amount, from, from + count - 1, merchantNo],
  );
}
