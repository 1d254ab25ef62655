/**
 * Is the database at the schema this build was made for? The migrations this build ships are drizzle's journal
 * (`packages/core/drizzle/meta/_journal.json`); those applied to a database are the rows of
 * `drizzle.__drizzle_migrations` (one per migration: the SQL file's sha256 and the journal's `when`). The worker and
 * the console check at start and refuse to run on a database that lacks any of them: a worker on an unmigrated
 * database once started "healthy" and failed jobs for good with `42P01 relation "orders" does not exist`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import type pg from 'pg';
import { AppError, ErrorCodes } from '../errors.ts';
import { MERCHANT_KEYS_MIGRATION, readMerchantKeys } from './merchant-keys.ts';
import { MIGRATIONS_FOLDER } from './migrations-folder.ts';

/** One migration of this build. */
export interface ShippedMigration {
  tag: string;
  /** The journal's `when`: drizzle stores it as `created_at`. */
  when: number;
  hash: string;
}

/** What the database holds, compared with what this build ships. */
export interface SchemaStatus {
  shipped: ShippedMigration[];
  /** Shipped migrations the database has not applied (the build needs them). */
  missing: ShippedMigration[];
  /** Applied with the same `when` but from a different SQL file (edited after it was applied somewhere). */
  changed: ShippedMigration[];
  /** Applied migrations this build does not know: a newer release migrated the database (expected mid-rollout). */
  newer: number;
}

/** The migrations this build ships, in order. */
export function shippedMigrations(folder = MIGRATIONS_FOLDER): ShippedMigration[] {
  const journal = JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as {
    entries: { tag: string; when: number }[];
  };
  const files = readMigrationFiles({ migrationsFolder: folder });
  return journal.entries.map((entry, i) => ({ tag: entry.tag, when: entry.when, hash: files[i]!.hash }));
}

/** Compare the database's applied migrations with this build's. Throws what the query throws (Postgres down). */
export async function readSchemaStatus(pool: pg.Pool, folder = MIGRATIONS_FOLDER): Promise<SchemaStatus> {
  const shipped = shippedMigrations(folder);
  const table = await pool.query<{ found: boolean }>(
    `select to_regclass('drizzle.__drizzle_migrations') is not null as found`,
  );
  const applied = table.rows[0]?.found
    ? (
        await pool.query<{ hash: string; created_at: string }>(
          'select hash, created_at::text from drizzle.__drizzle_migrations',
        )
      ).rows
    : [];
  const byWhen = new Map(applied.map((r) => [Number(r.created_at), r.hash]));
  const known = new Set(shipped.map((m) => m.when));
  return {
    shipped,
    missing: shipped.filter((m) => !byWhen.has(m.when)),
    changed: shipped.filter((m) => byWhen.has(m.when) && byWhen.get(m.when) !== m.hash),
    newer: applied.filter((r) => !known.has(Number(r.created_at))).length,
  };
}

/** Errors that mean "Postgres is not there yet", worth waiting out at start. */
function isConnectionError(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return (
    (typeof code === 'string' &&
      (['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', '57P03'].includes(code) ||
        code.startsWith('08'))) ||
    /timeout exceeded when trying to connect|Connection terminated/i.test((e as Error)?.message ?? '')
  );
}

/**
 * The merchant keys step of `pnpm db:migrate` (merchant-keys.ts) is part of the schema: this build's look-ups and
 * commits name the per-merchant unique indexes in ON CONFLICT. A process serving two or more merchants also needs
 * the single-merchant ones gone.
 */
async function requireMerchantKeys(pool: pg.Pool, options: RequireSchemaOptions): Promise<void> {
  const keys = await readMerchantKeys(pool);
  if (keys.pending.length > 0) {
    throw new AppError(
      ErrorCodes.DB_SCHEMA_OUTDATED,
      `the merchant keys of this database are not built yet (${keys.pending.slice(0, 3).join(', ')}` +
        `${keys.pending.length > 3 ? ', ...' : ''}): run \`pnpm db:migrate\` (it builds them without blocking ` +
        `writes), then start the ${options.app} again; it takes no job until then`,
      { details: { pending: keys.pending } },
    );
  }
  if ((options.merchants ?? 1) > 1 && keys.legacy.length > 0) {
    throw new AppError(
      ErrorCodes.DB_SCHEMA_OUTDATED,
      `this ${options.app} serves ${options.merchants} merchant numbers, and the database still has the ` +
        `single-merchant unique indexes (${keys.legacy.join(', ')}): once no process of the previous release runs, ` +
        'run `pnpm db:migrate --finish-merchants`, then start it again (docs/deployment.md, "Several merchant numbers")',
      { details: { legacy: keys.legacy } },
    );
  }
}

/** Options of {@link requireMigratedSchema}. */
export interface RequireSchemaOptions {
  /** Who checks, for the message ("worker", "console"). */
  app: string;
  /** Logs the wait for Postgres and a database that is ahead of this build. */
  logger: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
  /** How long to wait for Postgres to answer at all, in ms. @defaultValue 60000 */
  waitMs?: number;
  /** The migrations folder. @defaultValue this build's */
  folder?: string;
  /**
   * How many merchant numbers the process serves. Two or more need the single-merchant unique indexes gone (`pnpm
   * db:migrate --finish-merchants`): with them a second merchant cannot reuse an order number, and its callbacks for
   * an OrderNo another merchant was paid under would fail. @defaultValue 1
   */
  merchants?: number;
}

/**
 * Wait for Postgres (up to `waitMs`), then refuse with `DB_SCHEMA_OUTDATED` when a migration of this build is not
 * applied. A database migrated further than this build (a newer release's migrations, applied before its rollout)
 * is logged and accepted: migrations keep the previous release working (docs/deployment.md).
 * @throws AppError DB_SCHEMA_OUTDATED naming the missing migrations; DB_UNAVAILABLE when Postgres never answers
 */
export async function requireMigratedSchema(pool: pg.Pool, options: RequireSchemaOptions): Promise<SchemaStatus> {
  const deadline = Date.now() + (options.waitMs ?? 60_000);
  let status: SchemaStatus | undefined;
  for (let attempt = 0; status === undefined; attempt++) {
    try {
      status = await readSchemaStatus(pool, options.folder);
    } catch (e) {
      if (!isConnectionError(e)) throw e;
      if (Date.now() >= deadline) {
        throw new AppError(
          ErrorCodes.DB_UNAVAILABLE,
          `Postgres did not answer within ${Math.round((options.waitMs ?? 60_000) / 1000)} s: ${(e as Error).message}`,
          { cause: e },
        );
      }
      if (attempt % 10 === 0)
        options.logger.warn({ err: e }, `${options.app}: waiting for Postgres to check the schema version`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  const latest = status.shipped.at(-1)?.tag ?? '(none)';
  if (status.missing.length > 0) {
    const names = status.missing.map((m) => m.tag);
    const shown = `${names.slice(0, 5).join(', ')}${names.length > 5 ? ', ...' : ''}`;
    throw new AppError(
      ErrorCodes.DB_SCHEMA_OUTDATED,
      `the database is not at the schema this ${options.app} was built for (${latest}): ` +
        `${names.length} migration(s) not applied (${shown}). ` +
        "Run the migrations first (`pnpm db:migrate`, or the image's " +
        '`node packages/core/src/db/migrate-cli.ts`), then start it again; it takes no job until then',
      { details: { missing: names, latest } },
    );
  }
  if (status.shipped.some((m) => m.tag === MERCHANT_KEYS_MIGRATION)) await requireMerchantKeys(pool, options);
  if (status.changed.length > 0) {
    options.logger.warn(
      { changed: status.changed.map((m) => m.tag) },
      'migration files differ from the ones applied to this database (edited after they were applied?)',
    );
  }
  if (status.newer > 0) {
    options.logger.info(
      { newer: status.newer, latest },
      'the database holds migrations newer than this build (a newer release is rolling out)',
    );
  }
  return status;
}
