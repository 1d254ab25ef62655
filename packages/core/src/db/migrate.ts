import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { AppError, ErrorCodes } from '../errors.ts';
import { createDb } from './client.ts';
import {
  buildMerchantKeys,
  finishMerchantKeys,
  MERCHANT_KEYS_MIGRATION,
  readMerchantKeys,
  storeDefaultMerchantNo,
  type MerchantKeysStatus,
} from './merchant-keys.ts';
import { MIGRATIONS_FOLDER } from './migrations-folder.ts';
import { shippedMigrations } from './schema-version.ts';

export { MIGRATIONS_FOLDER };

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * Create the database named in `url` when it does not exist, connecting to the server's `postgres` database.
 * @returns whether it was created.
 */
export async function ensureDatabase(url: string): Promise<boolean> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  if (!name) throw new AppError(ErrorCodes.CONFIG_INVALID, 'DATABASE_URL names no database');
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount) return false;
    try {
      await client.query(`create database ${quoteIdent(name)}`);
    } catch (e) {
      // Another process created it between our check and our create.
      if ((e as { code?: string }).code === '42P04') return false;
      throw e;
    }
    return true;
  } finally {
    await client.end();
  }
}

/** Options of {@link migrateDatabase}. */
export interface MigrateOptions {
  /**
   * The merchant number that rows written without one get (the column default of `merchant_no`, migration 0014):
   * MERCHANT_NO of a single-merchant deployment, so that its previous release's inserts keep working during the
   * rollout. Required to apply 0014 to a database that already holds migrations (its rows get it). `undefined`
   * leaves the stored one; `null` clears it once the single-merchant indexes are gone (until then the previous
   * release may still be writing), so that a write without a merchant number fails. @defaultValue undefined
   */
  defaultMerchantNo?: string | null;
  /**
   * Drop the single-merchant unique indexes (`--finish-merchants`), once no process of the previous release runs. A
   * fresh database (no migration applied before this run) is finished anyway. @defaultValue false
   */
  finishMerchants?: boolean;
  /** The migrations to apply. @defaultValue this build's */
  migrationsFolder?: string;
  /** Told each step of the merchant keys as it starts. */
  log?: (line: string) => void;
}

/** Result of {@link migrateDatabase}. */
export interface MigrateResult {
  createdDatabase: boolean;
  /** Migrations applied by this run (0 when already up to date). */
  applied: number;
  /** Where the merchant keys stand after this run (absent when the folder stops before migration 0014). */
  merchantKeys?: MerchantKeysStatus;
  /** The single-merchant indexes this run dropped. */
  finished: string[];
}

const MIGRATOR_LOCK = 823746001;

/**
 * Take the migrators' advisory lock, polling: a session waiting in pg_advisory_lock holds a snapshot for as long as
 * it waits, and CREATE INDEX CONCURRENTLY in the holder waits for every older snapshot, so the two would deadlock.
 */
async function takeMigratorLock(client: pg.ClientBase): Promise<void> {
  for (;;) {
    const { rows } = await client.query<{ ok: boolean }>('select pg_try_advisory_lock($1) as ok', [MIGRATOR_LOCK]);
    if (rows[0]?.ok) return;
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function appliedCount(client: pg.ClientBase): Promise<number> {
  const r = await client.query<{ n: string }>(
    `select count(*)::text as n from information_schema.tables
      where table_schema = 'drizzle' and table_name = '__drizzle_migrations'`,
  );
  if (r.rows[0]?.n === '0') return 0;
  const m = await client.query<{ n: string }>('select count(*)::text as n from drizzle.__drizzle_migrations');
  return Number(m.rows[0]?.n ?? 0);
}

/**
 * Before migration 0014 reaches a database that already has rows of a single-merchant release: their merchant number
 * must be given, and must be the one their receipts carry (the callbacks' MerchantNo, which ingest checked).
 */
async function checkBeforeMerchantKeys(
  client: pg.ClientBase,
  folder: string,
  before: number,
  merchantNo: string | null | undefined,
): Promise<void> {
  if (before === 0 || !shippedMigrations(folder).some((m) => m.tag === MERCHANT_KEYS_MIGRATION)) return;
  const { rows } = await client.query<{ found: boolean }>(
    `select to_regclass('public.merchant_settings') is not null as found`,
  );
  if (rows[0]?.found) return;
  if (typeof merchantNo !== 'string' || merchantNo === '') {
    throw new AppError(
      ErrorCodes.DB_MIGRATION_FAILED,
      `migration ${MERCHANT_KEYS_MIGRATION} gives every row of this database a merchant number, and the previous ` +
        "release's writes during the rollout too: set MERCHANT_NO (this deployment's one merchant number, not a " +
        'MERCHANTS_FILE of several) and run `pnpm db:migrate` again (docs/deployment.md, "Several merchant numbers")',
    );
  }
  const other = await client.query<{ merchant_no: string }>(
    'select distinct merchant_no from callback_receipts where merchant_no <> $1 limit 3',
    [merchantNo],
  );
  if (other.rows.length > 0) {
    throw new AppError(
      ErrorCodes.DB_MIGRATION_FAILED,
      `MERCHANT_NO ${merchantNo} is not the merchant number of the callbacks this database applied ` +
        `(${other.rows.map((r) => r.merchant_no).join(', ')}): give the deployment's own merchant number`,
    );
  }
}

/**
 * Create the database if needed, apply pending migrations, then the merchant keys step (merchant-keys.ts: what
 * migration 0014 cannot do in a transaction without blocking writes). A no-op when up to date.
 */
export async function migrateDatabase(url: string, options: MigrateOptions = {}): Promise<MigrateResult> {
  const createdDatabase = await ensureDatabase(url);
  const folder = options.migrationsFolder ?? MIGRATIONS_FOLDER;
  const handle = createDb(url, { max: 2, applicationName: 'mcb-migrate' });
  try {
    // Serialise concurrent migrators (several apps starting at once) on one advisory lock.
    const lockClient = await handle.pool.connect();
    try {
      await takeMigratorLock(lockClient);
      try {
        const before = await appliedCount(lockClient);
        await checkBeforeMerchantKeys(lockClient, folder, before, options.defaultMerchantNo);
        // Migration 0014 stores this session's merchant number as the default (and fills the rows with it).
        await lockClient.query(`select set_config('mcb.default_merchant_no', $1, false)`, [
          options.defaultMerchantNo ?? '',
        ]);
        await migrate(drizzle(lockClient), { migrationsFolder: folder });
        await lockClient.query('reset mcb.default_merchant_no');
        const applied = (await appliedCount(lockClient)) - before;
        const done = await merchantKeysStep(lockClient, { ...options, fresh: before === 0 });
        return { createdDatabase, applied, ...done };
      } finally {
        await lockClient.query('select pg_advisory_unlock($1)', [MIGRATOR_LOCK]);
      }
    } finally {
      lockClient.release();
    }
  } catch (e) {
    if (e instanceof AppError) throw e;
    throw new AppError(ErrorCodes.DB_MIGRATION_FAILED, `migration failed: ${(e as Error).message}`, { cause: e });
  } finally {
    await handle.close();
  }
}

/** The merchant keys, once migration 0014 is applied: store the default, build, and finish when told (or fresh). */
async function merchantKeysStep(
  client: pg.ClientBase,
  options: MigrateOptions & { fresh: boolean },
): Promise<Pick<MigrateResult, 'merchantKeys' | 'finished'>> {
  const status = await readMerchantKeys(client);
  if (!status.migrated) return { finished: [] };
  if (options.defaultMerchantNo !== null) await storeDefaultMerchantNo(client, options.defaultMerchantNo);
  if (status.pending.length > 0) await buildMerchantKeys(client, { log: options.log });
  const finished =
    options.finishMerchants || options.fresh ? await finishMerchantKeys(client, { log: options.log }) : [];
  const after = await readMerchantKeys(client);
  if (options.defaultMerchantNo === null && after.defaultMerchantNo !== null) {
    if (after.legacy.length === 0) {
      await storeDefaultMerchantNo(client, null);
      options.log?.(
        `cleared the default merchant number ${after.defaultMerchantNo}: every write must name its merchant`,
      );
    } else {
      options.log?.(
        `kept the default merchant number ${after.defaultMerchantNo} for the previous release until --finish-merchants`,
      );
    }
  }
  return { merchantKeys: await readMerchantKeys(client), finished };
}
