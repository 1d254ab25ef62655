/**
 * The merchant keys step of `pnpm db:migrate` (issue 50): what migration 0014 cannot do inside drizzle's
 * transaction without blocking writes. Each part is idempotent and resumes where a failed or interrupted run stopped:
 * 1. NOT NULL on `merchant_no`: the NOT VALID check of 0014 is validated (a scan that lets writes through), then
 *    SET NOT NULL uses it instead of scanning under an exclusive lock;
 * 2. the per-merchant unique indexes, CREATE ... CONCURRENTLY (an INVALID one left by a failed build is dropped and
 *    built again);
 * 3. the composite foreign keys that hold a receipt, a ledger entry, an outbox event and a note to their merchant's
 *    order or receipt: added NOT VALID, then validated; the single-column ones they replace are dropped.
 * Finishing ({@link finishMerchantKeys}) drops the single-merchant unique indexes, which the previous release's
 * ON CONFLICT clauses name (callback_arrivals' primary key on job_id alone gives way to the one on (job_id,
 * merchant_no) built in step 2): only once none of its processes runs.
 */
import type pg from 'pg';
import { AppError, ErrorCodes } from '../errors.ts';

/** The migration that gives the ledger its merchant. */
export const MERCHANT_KEYS_MIGRATION = '0014_merchant_keys';

/** Tables that gained `merchant_no` in migration 0014 (callback_receipts always had it). */
export const MERCHANT_TABLES = [
  'orders',
  'ledger_entries',
  'order_events',
  'reviews',
  'order_notes',
  'callback_arrivals',
  'replay_jobs',
] as const;

interface IndexSpec {
  name: string;
  create: string;
}

/** callback_arrivals' key once the rollout is finished: a job id is unique within one merchant's queue only. */
export const ARRIVALS_KEY = 'callback_arrivals_merchant_job_pk';
/** Its key of the single-merchant release: the primary key on job_id alone (migration 0005). */
const ARRIVALS_LEGACY_KEY = 'callback_arrivals_pkey';

/** The per-merchant indexes, as drizzle-kit writes them for schema.ts (CONCURRENTLY added). */
export const MERCHANT_INDEXES: readonly IndexSpec[] = [
  {
    name: 'orders_merchant_order_key',
    create:
      'CREATE UNIQUE INDEX CONCURRENTLY "orders_merchant_order_key" ON "orders" USING btree ("merchant_order_no","merchant_no")',
  },
  {
    name: 'orders_id_merchant_key',
    create: 'CREATE UNIQUE INDEX CONCURRENTLY "orders_id_merchant_key" ON "orders" USING btree ("id","merchant_no")',
  },
  {
    name: 'orders_merchant_pending_created_idx',
    create:
      'CREATE INDEX CONCURRENTLY "orders_merchant_pending_created_idx" ON "orders" USING btree ("merchant_no","created_at","id") ' +
      `WHERE "orders"."status" = 'pending'`,
  },
  {
    name: 'callback_receipts_pair_merchant_key',
    create:
      'CREATE UNIQUE INDEX CONCURRENTLY "callback_receipts_pair_merchant_key" ON "callback_receipts" ' +
      'USING btree ("order_no","state","merchant_no")',
  },
  {
    name: 'callback_receipts_id_merchant_key',
    create:
      'CREATE UNIQUE INDEX CONCURRENTLY "callback_receipts_id_merchant_key" ON "callback_receipts" USING btree ("id","merchant_no")',
  },
  {
    name: 'reviews_open_event_merchant_key',
    create:
      'CREATE UNIQUE INDEX CONCURRENTLY "reviews_open_event_merchant_key" ON "reviews" USING btree ("order_no","state","merchant_no") ' +
      `WHERE "reviews"."status" = 'open'`,
  },
  {
    // The primary key to be (schema.ts): --finish-merchants makes it one, in place of callback_arrivals_pkey.
    name: ARRIVALS_KEY,
    create: `CREATE UNIQUE INDEX CONCURRENTLY "${ARRIVALS_KEY}" ON "callback_arrivals" USING btree ("job_id","merchant_no")`,
  },
  // Migration 0016's (issue 51): one merchant's callbacks and events, for the console's lists by merchant.
  {
    name: 'callback_arrivals_merchant_received_idx',
    create:
      'CREATE INDEX CONCURRENTLY "callback_arrivals_merchant_received_idx" ON "callback_arrivals" ' +
      'USING btree ("merchant_no","received_at","job_id")',
  },
  {
    name: 'order_events_merchant_id_idx',
    create:
      'CREATE INDEX CONCURRENTLY "order_events_merchant_id_idx" ON "order_events" USING btree ("merchant_no","id")',
  },
  // Migration 0017's: one merchant's arrivals by their last report, for the console's per-minute roll-up and the
  // merchants list's credit figures (minutes or an hour of them, not the day their callbacks arrived in).
  {
    name: 'callback_arrivals_merchant_updated_idx',
    create:
      'CREATE INDEX CONCURRENTLY "callback_arrivals_merchant_updated_idx" ON "callback_arrivals" USING btree ("merchant_no","updated_at")',
  },
];

interface ForeignKeySpec {
  name: string;
  table: string;
  /** The table it points at: locked first, in the order the apps' transactions take them (no deadlock). */
  references: string;
  definition: string;
  /** The single-column key it replaces (migrations 0000 and 0009). */
  replaces: string;
}

/** The composite foreign keys: nothing of one merchant can point at another merchant's order or receipt. */
export const MERCHANT_FOREIGN_KEYS: readonly ForeignKeySpec[] = [
  {
    name: 'callback_receipts_order_merchant_fk',
    table: 'callback_receipts',
    references: 'orders',
    definition: 'FOREIGN KEY ("order_id","merchant_no") REFERENCES "public"."orders"("id","merchant_no")',
    replaces: 'callback_receipts_order_id_orders_id_fk',
  },
  {
    name: 'ledger_entries_order_merchant_fk',
    table: 'ledger_entries',
    references: 'orders',
    definition: 'FOREIGN KEY ("order_id","merchant_no") REFERENCES "public"."orders"("id","merchant_no")',
    replaces: 'ledger_entries_order_id_orders_id_fk',
  },
  {
    name: 'ledger_entries_receipt_merchant_fk',
    table: 'ledger_entries',
    references: 'callback_receipts',
    definition: 'FOREIGN KEY ("receipt_id","merchant_no") REFERENCES "public"."callback_receipts"("id","merchant_no")',
    replaces: 'ledger_entries_receipt_id_callback_receipts_id_fk',
  },
  {
    name: 'order_events_order_merchant_fk',
    table: 'order_events',
    references: 'orders',
    definition: 'FOREIGN KEY ("order_id","merchant_no") REFERENCES "public"."orders"("id","merchant_no")',
    replaces: 'order_events_order_id_orders_id_fk',
  },
  {
    name: 'order_notes_receipt_merchant_fk',
    table: 'order_notes',
    references: 'callback_receipts',
    definition: 'FOREIGN KEY ("receipt_id","merchant_no") REFERENCES "public"."callback_receipts"("id","merchant_no")',
    replaces: 'order_notes_receipt_id_callback_receipts_id_fk',
  },
];

/**
 * The single-merchant indexes: the previous release's `ON CONFLICT (merchant_order_no)`, `(order_no, state)` and
 * `(order_no, state) WHERE status = 'open'` need the first three while any of its processes runs; with them in place a
 * second merchant cannot reuse an order number. The fourth is its sweep's. The last is callback_arrivals' primary key
 * on job_id alone (its recorder's `ON CONFLICT (job_id)`): with it, two merchants' jobs of one id would share a row.
 * Finishing drops the indexes and puts {@link ARRIVALS_KEY} in the primary key's place (the table keeps an identity).
 */
export const LEGACY_INDEXES = [
  'orders_merchant_order_no_key',
  'callback_receipts_order_no_state_key',
  'reviews_open_event_key',
  'orders_pending_created_idx',
  ARRIVALS_LEGACY_KEY,
] as const;

/** Where the merchant keys of a database stand. */
export interface MerchantKeysStatus {
  /** Whether migration 0014 is applied (merchant_settings exists). */
  migrated: boolean;
  /** What the merchant keys step has still to do (empty: done). */
  pending: string[];
  /** The single-merchant indexes still in place (empty: finished). */
  legacy: string[];
  /** The merchant number stored for rows written without one. */
  defaultMerchantNo: string | null;
}

type Queryable = Pick<pg.ClientBase, 'query'>;

/** Read where the merchant keys stand (a few catalogue reads; any role may run it). */
export async function readMerchantKeys(db: Queryable): Promise<MerchantKeysStatus> {
  const found = await db.query<{ found: boolean }>(
    `select to_regclass('public.merchant_settings') is not null as found`,
  );
  if (!found.rows[0]?.found) {
    return { migrated: false, pending: ['migration 0014'], legacy: [...LEGACY_INDEXES], defaultMerchantNo: null };
  }
  const names = [...MERCHANT_INDEXES.map((i) => i.name), ...LEGACY_INDEXES];
  // One after another: `db` may be a single client.
  const indexes = await db.query<{ name: string; valid: boolean }>(
    `select c.relname as name, i.indisvalid as valid from pg_class c join pg_index i on i.indexrelid = c.oid
      where c.relnamespace = 'public'::regnamespace and c.relname = any($1::text[])`,
    [names],
  );
  const columns = await db.query<{ table: string; notnull: boolean }>(
    `select c.relname as table, a.attnotnull as notnull from pg_attribute a join pg_class c on c.oid = a.attrelid
      where c.relnamespace = 'public'::regnamespace and c.relname = any($1::text[]) and a.attname = 'merchant_no'`,
    [[...MERCHANT_TABLES]],
  );
  const keys = await db.query<{ name: string; validated: boolean }>(
    `select conname as name, convalidated as validated from pg_constraint
      where connamespace = 'public'::regnamespace and conname = any($1::text[])`,
    [MERCHANT_FOREIGN_KEYS.map((k) => k.name)],
  );
  const setting = await db.query<{ merchant_no: string | null }>('select mcb_default_merchant_no() as merchant_no');
  const valid = new Map(indexes.rows.map((r) => [r.name, r.valid]));
  const notNull = new Map(columns.rows.map((r) => [r.table, r.notnull]));
  const validated = new Map(keys.rows.map((r) => [r.name, r.validated]));
  return {
    migrated: true,
    pending: [
      ...MERCHANT_TABLES.filter((t) => !notNull.get(t)).map((t) => `${t}.merchant_no NOT NULL`),
      ...MERCHANT_INDEXES.filter((i) => !valid.get(i.name)).map((i) => `index ${i.name}`),
      ...MERCHANT_FOREIGN_KEYS.filter((k) => !validated.get(k.name)).map((k) => `foreign key ${k.name}`),
    ],
    legacy: LEGACY_INDEXES.filter((name) => valid.has(name)),
    defaultMerchantNo: setting.rows[0]?.merchant_no ?? null,
  };
}

/** Options of {@link buildMerchantKeys} and {@link finishMerchantKeys}. */
export interface MerchantKeysOptions {
  /** Told each change as it starts (the CLI prints them). */
  log?: (line: string) => void;
  /**
   * Longest wait for the brief exclusive lock of an ALTER TABLE (a long transaction holding the table would make
   * every write queue behind the ALTER), in ms; the statement is tried again up to 20 times. Below Postgres'
   * deadlock_timeout (1 s by default): when an ALTER and an app's transaction wait for each other, the ALTER gives up
   * before the deadlock check runs, so the migration, never the app's write, is the one that gives way.
   * @defaultValue 500
   */
  lockTimeoutMs?: number;
}

/** lock_not_available (our lock_timeout) and deadlock_detected: give way and try again. */
const GIVE_WAY = new Set(['55P03', '40P01']);

/**
 * Run a short catalogue change in its own transaction, giving way to the apps' transactions: bounded lock waits,
 * tried again. `first` is locked before the statement runs: a foreign key locks the table it points at as well as
 * its own, and the apps' transactions write the order before its receipt and the receipt before its ledger entry;
 * taken the other way round, a writer and the ALTER would wait for each other (a deadlock).
 */
async function alter(
  client: Queryable,
  statement: string,
  options: MerchantKeysOptions,
  first?: string,
): Promise<void> {
  const timeout = Math.round(options.lockTimeoutMs ?? 500);
  for (let attempt = 1; ; attempt++) {
    try {
      await client.query(`BEGIN; SET LOCAL lock_timeout = ${timeout}`);
      if (first) await client.query(`LOCK TABLE "${first}" IN SHARE ROW EXCLUSIVE MODE`);
      await client.query(statement);
      await client.query('COMMIT');
      return;
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      if (!GIVE_WAY.has((e as { code?: string }).code ?? '') || attempt >= 20) throw e;
      options.log?.(`  giving way to the apps' transactions (attempt ${attempt}): ${statement.slice(0, 80)}`);
      await new Promise((r) => setTimeout(r, Math.min(5000, 200 * attempt)));
    }
  }
}

async function constraintState(client: Queryable, table: string, name: string): Promise<boolean | undefined> {
  const { rows } = await client.query<{ validated: boolean }>(
    `select convalidated as validated from pg_constraint where conrelid = $1::regclass and conname = $2`,
    [`public.${table}`, name],
  );
  return rows[0]?.validated;
}

/** 1. NOT NULL on each table's merchant_no, through its validated check. */
async function requireMerchantNo(client: Queryable, options: MerchantKeysOptions): Promise<void> {
  for (const table of MERCHANT_TABLES) {
    const check = `${table}_merchant_no_not_null`;
    const { rows } = await client.query<{ notnull: boolean }>(
      `select attnotnull as notnull from pg_attribute where attrelid = $1::regclass and attname = 'merchant_no'`,
      [`public.${table}`],
    );
    if (!rows[0]?.notnull) {
      const state = await constraintState(client, table, check);
      if (state === undefined) {
        await alter(
          client,
          `ALTER TABLE "${table}" ADD CONSTRAINT "${check}" CHECK ("merchant_no" IS NOT NULL) NOT VALID`,
          options,
        );
      }
      if (state !== true) {
        options.log?.(`validating ${table}.merchant_no (every row has one)`);
        try {
          await client.query(`ALTER TABLE "${table}" VALIDATE CONSTRAINT "${check}"`);
        } catch (e) {
          if ((e as { code?: string }).code !== '23514') throw e;
          const n = await client.query<{ n: string }>(
            `select count(*)::text as n from "${table}" where merchant_no is null`,
          );
          throw new AppError(
            ErrorCodes.DB_MIGRATION_FAILED,
            `${n.rows[0]?.n ?? 'some'} row(s) of ${table} have no merchant number: they were written while no ` +
              'default merchant number was stored. Run `pnpm db:migrate` with MERCHANT_NO set to the merchant they ' +
              `belong to, after setting it on those rows (update ${table} set merchant_no = ... where merchant_no is null)`,
            { cause: e, details: { table } },
          );
        }
      }
      await alter(client, `ALTER TABLE "${table}" ALTER COLUMN "merchant_no" SET NOT NULL`, options);
    }
    await alter(client, `ALTER TABLE "${table}" DROP CONSTRAINT IF EXISTS "${check}"`, options);
  }
}

/** Build one index without blocking writes; an INVALID leftover of a failed build is dropped first. */
async function ensureIndex(client: Queryable, spec: IndexSpec, options: MerchantKeysOptions): Promise<void> {
  const { rows } = await client.query<{ valid: boolean }>(
    `select i.indisvalid as valid from pg_class c join pg_index i on i.indexrelid = c.oid
      where c.relnamespace = 'public'::regnamespace and c.relname = $1`,
    [spec.name],
  );
  if (rows[0]?.valid) return;
  if (rows[0]) {
    options.log?.(`dropping index ${spec.name}: INVALID, left by a build that failed or was interrupted`);
    await client.query(`DROP INDEX CONCURRENTLY IF EXISTS "${spec.name}"`);
  }
  options.log?.(`building index ${spec.name} (concurrently: writes go on)`);
  try {
    await client.query(spec.create);
  } catch (e) {
    if ((e as { code?: string }).code === '23505') {
      throw new AppError(
        ErrorCodes.DB_MIGRATION_FAILED,
        `index ${spec.name} cannot be built: two rows share its key (${(e as { detail?: string }).detail ?? ''}). ` +
          'The build left an INVALID index, which the next `pnpm db:migrate` drops before trying again',
        { cause: e, details: { index: spec.name } },
      );
    }
    throw e;
  }
}

/** 3. A composite foreign key, added NOT VALID (brief lock) and validated (no write blocked); the old one dropped. */
async function ensureForeignKey(client: Queryable, spec: ForeignKeySpec, options: MerchantKeysOptions): Promise<void> {
  const state = await constraintState(client, spec.table, spec.name);
  if (state === undefined) {
    await alter(
      client,
      `ALTER TABLE "${spec.table}" ADD CONSTRAINT "${spec.name}" ${spec.definition} NOT VALID`,
      options,
    );
  }
  if (state !== true) {
    options.log?.(`validating foreign key ${spec.name}`);
    try {
      await client.query(`ALTER TABLE "${spec.table}" VALIDATE CONSTRAINT "${spec.name}"`);
    } catch (e) {
      if ((e as { code?: string }).code !== '23503') throw e;
      throw new AppError(
        ErrorCodes.DB_MIGRATION_FAILED,
        `${spec.table} holds rows whose merchant number is not that of the row they point at (${spec.name}): the ` +
          'merchant number given to `pnpm db:migrate` (MERCHANT_NO) is not the one the stored callbacks carry',
        { cause: e, details: { constraint: spec.name } },
      );
    }
  }
  await alter(
    client,
    `ALTER TABLE "${spec.table}" DROP CONSTRAINT IF EXISTS "${spec.replaces}"`,
    options,
    spec.references,
  );
}

/**
 * Build the merchant keys (steps 1-3 above) on `client`, a session outside any transaction: CREATE INDEX
 * CONCURRENTLY cannot run in one. Idempotent; resumes after a failure.
 * @throws AppError DB_MIGRATION_FAILED saying which rows stand in the way
 */
export async function buildMerchantKeys(client: Queryable, options: MerchantKeysOptions = {}): Promise<void> {
  // An index build may take a while on a large table: no statement timeout for this session.
  await client.query('SET statement_timeout = 0');
  await requireMerchantNo(client, options);
  for (const spec of MERCHANT_INDEXES) await ensureIndex(client, spec, options);
  for (const spec of MERCHANT_FOREIGN_KEYS) await ensureForeignKey(client, spec, options);
}

/**
 * Finish: drop the single-merchant unique indexes, so that a second merchant may reuse an order number. Only once no
 * process of the previous release runs: its ON CONFLICT clauses name them, and its inserts would fail.
 * @throws AppError DB_MIGRATION_FAILED when the merchant keys are not built yet
 */
export async function finishMerchantKeys(client: Queryable, options: MerchantKeysOptions = {}): Promise<string[]> {
  const status = await readMerchantKeys(client);
  if (status.pending.length > 0) {
    throw new AppError(
      ErrorCodes.DB_MIGRATION_FAILED,
      `the merchant keys are not built yet (${status.pending.join(', ')}): run \`pnpm db:migrate\` first`,
      { details: { pending: status.pending } },
    );
  }
  await client.query('SET statement_timeout = 0');
  for (const name of status.legacy) {
    if (name === ARRIVALS_LEGACY_KEY) {
      // A constraint's index cannot be dropped alone. One statement: the table is never without a primary key, and
      // the built unique index becomes it (no scan: its columns are NOT NULL, the index valid); a brief exclusive lock.
      options.log?.(`replacing the primary key ${name} of callback_arrivals with ${ARRIVALS_KEY}`);
      await alter(
        client,
        `ALTER TABLE "callback_arrivals" DROP CONSTRAINT IF EXISTS "${name}", ` +
          `ADD CONSTRAINT "${ARRIVALS_KEY}" PRIMARY KEY USING INDEX "${ARRIVALS_KEY}"`,
        options,
      );
      continue;
    }
    options.log?.(`dropping the single-merchant index ${name} (concurrently)`);
    await client.query(`DROP INDEX CONCURRENTLY IF EXISTS "${name}"`);
  }
  return status.legacy;
}

/**
 * Store the merchant number that rows written without one get (`undefined` leaves it; `null` clears it, so such a
 * write fails: a deployment of several merchants, once no previous release runs).
 */
export async function storeDefaultMerchantNo(client: Queryable, merchantNo: string | null | undefined): Promise<void> {
  if (merchantNo === undefined) return;
  await client.query(
    `update merchant_settings set default_merchant_no = $1, updated_at = now()
      where id and default_merchant_no is distinct from $1`,
    [merchantNo],
  );
}
