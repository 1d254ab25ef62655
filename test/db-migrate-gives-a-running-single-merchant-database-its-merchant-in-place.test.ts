import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  createDb,
  LEGACY_INDEXES,
  migrateDatabase,
  MIGRATIONS_FOLDER,
  readMerchantKeys,
  requireMigratedSchema,
  shippedMigrations,
} from '@mcb/core/db';
import { commitEvents, findOrder } from '@mcb/settlement';
import { testServices } from '@mcb/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The rollout of migration 0014 on a database that today's main (migrations 0000-0013, one MERCHANT_NO) has been
// writing, as docs/deployment.md ("Several merchant numbers") tells it: `pnpm db:migrate` with MERCHANT_NO while the
// old release keeps writing (its SQL, below, names no merchant and conflicts on the single-merchant keys), then new
// and old side by side, then `pnpm db:migrate --finish-merchants` once the old one is gone.

const run = promisify(execFile);
const cli = fileURLToPath(new URL('../packages/core/src/db/migrate-cli.ts', import.meta.url));
const M = 'M-TODAY';
const TABLES = [
  'orders',
  'callback_receipts',
  'ledger_entries',
  'order_events',
  'reviews',
  'order_notes',
  'callback_arrivals',
  'replay_jobs',
];

const name = `mcb_t_${Date.now()}_${randomBytes(4).toString('hex')}`;
const url = new URL(testServices().databaseUrl);
url.pathname = `/${name}`;
let folder: string;
let pool: pg.Pool;

/** Today's migrations only: this build's folder up to 0013. */
async function todaysMigrations(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mcb-0013-'));
  const journal = JSON.parse(await readFile(join(MIGRATIONS_FOLDER, 'meta', '_journal.json'), 'utf8')) as {
    entries: { idx: number; tag: string }[];
  };
  journal.entries = journal.entries.filter((e) => e.idx <= 13);
  expect(journal.entries.at(-1)?.tag).toBe('0013_audit_via_and_customer_index');
  await mkdir(join(dir, 'meta'));
  await writeFile(join(dir, 'meta', '_journal.json'), JSON.stringify(journal));
  for (const e of journal.entries) await copyFile(join(MIGRATIONS_FOLDER, `${e.tag}.sql`), join(dir, `${e.tag}.sql`));
  return dir;
}

/** `pnpm db:migrate [args]` with MERCHANT_NO set or not: its output, or its failure. */
async function dbMigrate(merchantNo: string | undefined, args: string[] = []) {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: url.toString() };
  delete env.MERCHANT_NO;
  delete env.DATABASE_MIGRATION_URL;
  if (merchantNo) env.MERCHANT_NO = merchantNo;
  return run(process.execPath, [cli, ...args], { env, encoding: 'utf8' }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
}

/**
 * Today's release writing one callback's worth of rows, with today's statements: registration, the commit (receipt,
 * guarded move, ledger, outbox), a review, a note, the arrival, a replay's job. None names a merchant number but the
 * receipt (the callback's MerchantNo).
 */
async function oldRelease(client: pg.Pool, n: string): Promise<void> {
  const tx = await client.connect();
  try {
    await tx.query('begin');
    const order = await tx.query<{ id: string }>(
      `insert into orders (merchant_order_no, kind, currency, amount, request_hash) values ($1, 'payin', 'PHP', '10', 'h')
       on conflict (merchant_order_no) do nothing returning id`,
      [`MO-${n}`],
    );
    const orderId = order.rows[0]!.id;
    await tx.query('select id from orders where id = any($1::bigint[]) order by id for no key update', [[orderId]]);
    const receipt = await tx.query<{ id: string }>(
      `insert into callback_receipts (order_no, state, kind, merchant_no, merchant_order_no, order_id, confirmed_amount,
                                      source, outcome, job_id)
       values ($1, 6, 'payin', $2, $3, $4, '10', 'callback', 'credited', $5)
       on conflict (order_no, state) do nothing returning id`,
      [`P-${n}`, M, `MO-${n}`, orderId, `payin-P-${n}-6`],
    );
    const receiptId = receipt.rows[0]!.id;
    await tx.query(
      `update orders set status = 'credited', platform_order_no = $2, updated_at = now(), finalized_at = now()
        where id = $1 and status = 'pending'`,
      [orderId, `P-${n}`],
    );
    await tx.query(
      `insert into ledger_entries (order_id, entry_type, amount, currency, receipt_id) values ($1, 'payin_credit', '10', 'PHP', $2)`,
      [orderId, receiptId],
    );
    await tx.query(
      `insert into order_events (order_id, merchant_order_no, event_type, payload) values ($1, $2, 'payin.credited', '{}')`,
      [orderId, `MO-${n}`],
    );
    await tx.query('commit');
    await client.query(
      `insert into reviews (kind, order_no, state, merchant_order_no, reason_code, reason, details, event)
       values ('payin', $1, 3, $2, 'VERIFY_AMOUNT_MISMATCH', 'r', '{}', '{}')
       on conflict (order_no, state) where status = 'open' do update set occurrences = reviews.occurrences + 1`,
      [`P-${n}`, `MO-${n}`],
    );
    await client.query(
      `insert into order_notes (merchant_order_no, order_no, state, receipt_id, job_id, topic, detail)
       values ($1, $2, 6, $3, 'j', 'unconfirmed-field-differs', 'd')
       on conflict (receipt_id, job_id, topic) do update set seen = order_notes.seen + 1`,
      [`MO-${n}`, `P-${n}`, receiptId],
    );
    await client.query(
      `insert into callback_arrivals (job_id, kind, order_no, state, merchant_order_no, received_at, first_seen_at,
                                      updated_at, attempts, status)
       values ($1, 'payin', $2, 6, $3, now(), now(), now(), 1, 'applied')
       on conflict (job_id) do update set attempts = excluded.attempts`,
      [`payin-P-${n}-6`, `P-${n}`, `MO-${n}`],
    );
    await client.query(`insert into replay_jobs (replay_id, job_id) select max(id), $1 from replays`, [
      `payin-P-${n}-6`,
    ]);
  } catch (e) {
    await tx.query('rollback').catch(() => {});
    throw e;
  } finally {
    tx.release();
  }
}

async function countRows(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of TABLES) out[t] = Number((await pool.query(`select count(*) as n from ${t}`)).rows[0].n);
  return out;
}

/** Rows of each table whose merchant number is not M (none, when the fill worked). */
async function rowsNotOf(merchantNo: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of TABLES) {
    const r = await pool.query(`select count(*) as n from ${t} where merchant_no is distinct from $1`, [merchantNo]);
    out[t] = Number(r.rows[0].n);
  }
  return out;
}

const quiet = { warn: () => {}, info: () => {} };

/** callback_arrivals' unique indexes: name, whether it is the primary key, definition. */
async function arrivalKeys() {
  const r = await pool.query<{ name: string; primary: boolean; def: string }>(
    `select c.relname as name, i.indisprimary as primary, pg_get_indexdef(i.indexrelid) as def
       from pg_index i join pg_class c on c.oid = i.indexrelid
      where i.indrelid = 'callback_arrivals'::regclass and i.indisunique order by 1`,
  );
  return r.rows;
}

beforeAll(async () => {
  folder = await todaysMigrations();
  await migrateDatabase(url.toString(), { migrationsFolder: folder });
  pool = new pg.Pool({ connectionString: url.toString(), max: 4 });
  await pool.query(
    `insert into replays (operator, reason, filter, rate_per_second, total) values ('ops', 'r', '{}', 1, 0)`,
  );
  for (let i = 0; i < 300; i++) await oldRelease(pool, `before-${i}`);
});

afterAll(async () => {
  await pool?.end();
  if (folder) await rm(folder, { recursive: true, force: true });
  const admin = new URL(testServices().databaseUrl);
  admin.pathname = '/postgres';
  const c = new pg.Client({ connectionString: admin.toString() });
  await c.connect();
  await c.query(`drop database if exists "${name}" with (force)`);
  await c.end();
});

describe('migrating a database of today’s release in place', () => {
  it('refuses to start without MERCHANT_NO, or with a number the stored callbacks do not carry, changing nothing', async () => {
    const none = await dbMigrate(undefined);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/set MERCHANT_NO/);
    const wrong = await dbMigrate('M-SOMEONE-ELSE');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/MERCHANT_NO M-SOMEONE-ELSE is not the merchant number of the callbacks .*M-TODAY/);
    expect((await readMerchantKeys(pool)).migrated).toBe(false);
  });

  it('fills every row with MERCHANT_NO and builds the keys while the old release goes on writing, losing nothing', async () => {
    const before = await countRows();
    // 1. The old release writes all along; the migration runs meanwhile.
    let written = 0;
    const failures: unknown[] = [];
    let migrating = true;
    const writer = (async () => {
      while (migrating) {
        await oldRelease(pool, `during-${written}`).then(
          () => void (written += 1),
          (e: unknown) => void failures.push(e),
        );
      }
    })();
    const migrated = await dbMigrate(M);
    migrating = false;
    await writer;
    expect(migrated.stderr).toBe('');
    expect(migrated.code).toBe(0);
    // Every migration after 0013: 0014 and 0015 (the merchant keys), and those since.
    expect(migrated.stdout).toMatch(new RegExp(`applied ${shippedMigrations().length - 14} migration`));
    expect(migrated.stdout).toMatch(/building index callback_arrivals_merchant_received_idx \(concurrently/);
    expect(migrated.stdout).toMatch(/building index callback_arrivals_merchant_updated_idx \(concurrently/);
    expect(migrated.stdout).toMatch(/building index orders_merchant_order_key \(concurrently/);
    expect(migrated.stdout).toMatch(/building index callback_arrivals_merchant_job_pk \(concurrently/);
    expect(migrated.stdout).toMatch(/--finish-merchants/);
    expect(failures).toEqual([]);
    expect(written).toBeGreaterThan(0);

    // 2. The old release still writes after it, with its own conflict targets.
    await oldRelease(pool, 'after');
    written += 1;
    const after = await countRows();
    for (const t of TABLES) expect(after[t], t).toBe(before[t]! + written);
    expect(await rowsNotOf(M)).toEqual(Object.fromEntries(TABLES.map((t) => [t, 0])));

    // 3. The keys are built and valid; the single-merchant indexes are kept for the old release.
    const keys = await readMerchantKeys(pool);
    expect(keys).toMatchObject({ migrated: true, pending: [], defaultMerchantNo: M });
    expect(keys.legacy.sort()).toEqual([...LEGACY_INDEXES].sort());
    const notNull = await pool.query(
      `select count(*)::int as n from pg_attribute where attname = 'merchant_no' and not attnotnull
          and attrelid = any(array[${TABLES.map((t) => `'${t}'::regclass`).join(',')}])`,
    );
    expect(notNull.rows[0].n).toBe(0);
    // callback_arrivals keeps its primary key on job_id (the old release's ON CONFLICT) beside the per-merchant key.
    expect(await arrivalKeys()).toEqual([
      {
        name: 'callback_arrivals_merchant_job_pk',
        primary: false,
        def: expect.stringMatching(/UNIQUE .*\(job_id, merchant_no\)/),
      },
      { name: 'callback_arrivals_pkey', primary: true, def: expect.stringMatching(/UNIQUE .*\(job_id\)$/) },
    ]);
    // A second run has nothing to do.
    const again = await dbMigrate(M);
    expect(again.stdout).toMatch(/is up to date/);
    expect(again.stdout).not.toMatch(/building index/);
  });

  it('lets the new release write beside the old one, and its commit credit an order the old release registered', async () => {
    // New style: every row names its merchant; conflicts on the per-merchant keys.
    await pool.query(
      `insert into orders (merchant_no, merchant_order_no, kind, currency, amount, request_hash)
       values ($1, 'MO-new', 'payin', 'PHP', '12.50', 'h') on conflict (merchant_no, merchant_order_no) do nothing`,
      [M],
    );
    await oldRelease(pool, 'beside');
    await pool.query(
      `insert into orders (merchant_order_no, kind, currency, amount, request_hash) values ('MO-old', 'payin', 'PHP', '7', 'h')
       on conflict (merchant_order_no) do nothing`,
    );
    const db = createDb(url.toString(), { max: 2 });
    try {
      for (const no of ['MO-new', 'MO-old']) {
        const order = (await findOrder(db.db, { merchantNo: M, merchantOrderNo: no }))!;
        expect(order.merchantNo).toBe(M);
        const event = {
          kind: 'payin' as const,
          orderNo: `P-${no}`,
          merchantNo: M,
          merchantOrderNo: no,
          state: 6,
          payTime: null,
          quantity: null,
          fiatAmount: order.amount,
          receivedAt: new Date().toISOString(),
          source: 'callback' as const,
        };
        const confirmed = { ...event, type: 'payin' as const, amount: order.amount, currency: 'PHP' };
        const [result] = await commitEvents(db.db, [{ event, order, confirmed, target: 'credited' }]);
        expect(result).toMatchObject({ ok: true, value: { status: 'applied', outcome: 'credited' } });
      }
    } finally {
      await db.close();
    }
    expect(await rowsNotOf(M)).toEqual(Object.fromEntries(TABLES.map((t) => [t, 0])));
  });

  it('drops and builds again an index a failed concurrent build left INVALID', async () => {
    await pool.query('drop index concurrently callback_receipts_pair_merchant_key');
    // A unique index on a constant fails on the second row, and CONCURRENTLY leaves it behind, INVALID.
    await expect(
      pool.query('create unique index concurrently callback_receipts_pair_merchant_key on callback_receipts ((1))'),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await readMerchantKeys(pool)).pending).toEqual(['index callback_receipts_pair_merchant_key']);
    await expect(requireMigratedSchema(pool, { app: 'worker', logger: quiet })).rejects.toMatchObject({
      code: 'DB_SCHEMA_OUTDATED',
      message: expect.stringMatching(/merchant keys .* not built yet .*pnpm db:migrate/),
    });

    const rebuilt = await dbMigrate(M);
    expect(rebuilt.code).toBe(0);
    expect(rebuilt.stdout).toMatch(/dropping index callback_receipts_pair_merchant_key: INVALID/);
    expect((await readMerchantKeys(pool)).pending).toEqual([]);
    const def = await pool.query(`select pg_get_indexdef('callback_receipts_pair_merchant_key'::regclass) as d`);
    expect(def.rows[0].d).toMatch(/UNIQUE INDEX .* \(order_no, state, merchant_no\)/);
  });

  it('serves two merchants only after --finish-merchants, which a second merchant needs to reuse an order number', async () => {
    await expect(requireMigratedSchema(pool, { app: 'worker', logger: quiet })).resolves.toBeDefined();
    await expect(requireMigratedSchema(pool, { app: 'worker', logger: quiet, merchants: 2 })).rejects.toMatchObject({
      code: 'DB_SCHEMA_OUTDATED',
      message: expect.stringMatching(/single-merchant unique indexes .*pnpm db:migrate --finish-merchants/),
    });
    await expect(
      pool.query(
        `insert into orders (merchant_no, merchant_order_no, kind, currency, amount, request_hash)
         values ('M-OTHER', 'MO-new', 'payin', 'PHP', '1', 'h')`,
      ),
    ).rejects.toMatchObject({ code: '23505', constraint: 'orders_merchant_order_no_key' });
    await expect(
      pool.query(
        `insert into callback_arrivals (merchant_no, job_id, kind, order_no, state, merchant_order_no, received_at,
                                        first_seen_at, updated_at, attempts, status)
         values ('M-OTHER', 'payin-P-before-0-6', 'payin', 'P-before-0', 6, 'MO-before-0', now(), now(), now(), 1, 'failed')
         on conflict (job_id, merchant_no) do nothing`,
      ),
    ).rejects.toMatchObject({ code: '23505', constraint: 'callback_arrivals_pkey' });

    const finished = await dbMigrate(M, ['--finish-merchants']);
    expect(finished.code).toBe(0);
    expect(finished.stdout).toMatch(/dropped the single-merchant indexes/);
    expect((await readMerchantKeys(pool)).legacy).toEqual([]);
    await expect(requireMigratedSchema(pool, { app: 'worker', logger: quiet, merchants: 2 })).resolves.toBeDefined();
    await pool.query(
      `insert into orders (merchant_no, merchant_order_no, kind, currency, amount, request_hash)
       values ('M-OTHER', 'MO-new', 'payin', 'PHP', '1', 'h')`,
    );
    // The table keeps an identity: the per-merchant key is its primary key now, and a job id of another merchant's
    // queue gets its own row (the new release's upsert conflicts on both columns).
    expect(await arrivalKeys()).toEqual([
      {
        name: 'callback_arrivals_merchant_job_pk',
        primary: true,
        def: expect.stringMatching(/\(job_id, merchant_no\)/),
      },
    ]);
    for (const merchantNo of [M, 'M-OTHER']) {
      await pool.query(
        `insert into callback_arrivals (merchant_no, job_id, kind, order_no, state, merchant_order_no, received_at,
                                        first_seen_at, updated_at, attempts, status)
         values ($1, 'payin-P-before-0-6', 'payin', 'P-before-0', 6, 'MO-before-0', now(), now(), now(), 1, 'failed')
         on conflict (job_id, merchant_no) do update set status = excluded.status`,
        [merchantNo],
      );
    }
    const arrivals = await pool.query(
      `select merchant_no, status from callback_arrivals where job_id = 'payin-P-before-0-6' order by 1`,
    );
    expect(arrivals.rows).toEqual([
      { merchant_no: 'M-OTHER', status: 'failed' },
      { merchant_no: M, status: 'failed' },
    ]);
    const both = await pool.query(
      `select merchant_no, amount::text from orders where merchant_order_no = 'MO-new' order by 1`,
    );
    expect(both.rows).toEqual([
      { merchant_no: 'M-OTHER', amount: '1' },
      { merchant_no: M, amount: '12.50' },
    ]);
  });

  it('clears the default merchant once several merchants are configured, so a write naming none fails', async () => {
    const file = join(folder, 'merchants.json');
    const entry = (ref: string, merchantNo: string) => ({ ref, merchantNo, privateKeyFiles: [`/keys/${ref}.pem`] });
    await writeFile(file, JSON.stringify({ merchants: [entry('today', M), entry('other', 'M-OTHER')] }));
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: url.toString(), MERCHANTS_FILE: file };
    delete env.MERCHANT_NO;
    delete env.MERCHANT_PRIVATE_KEY_FILE;
    delete env.DATABASE_MIGRATION_URL;
    const r = await run(process.execPath, [cli], { env, encoding: 'utf8' });
    expect(r.stdout).toMatch(/cleared the default merchant number M-TODAY/);
    expect((await readMerchantKeys(pool)).defaultMerchantNo).toBeNull();
    await expect(
      pool.query(
        `insert into orders (merchant_order_no, kind, currency, amount, request_hash) values ('MO-none', 'payin', 'PHP', '1', 'h')`,
      ),
    ).rejects.toMatchObject({ code: '23502', column: 'merchant_no' });
  });
});
