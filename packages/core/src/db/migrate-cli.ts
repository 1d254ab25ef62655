// First, before anything that loads drizzle-orm is resolved; the migrator comes by import() below.
import '../module-hooks.ts';
import { loadConfig } from '../config/index.ts';
import { AppError, coerceError, ErrorCodes } from '../errors.ts';

const USAGE = 'usage: pnpm db:migrate [--finish-merchants]';

// `pnpm db:migrate`: create the database when missing, apply pending migrations and the merchant keys step, say what
// happened. `--finish-merchants`: also drop the single-merchant unique indexes, once no process of the previous
// release runs (docs/deployment.md, "Several merchant numbers").
try {
  const args = process.argv.slice(2);
  const unknown = args.filter((a) => a !== '--finish-merchants');
  if (unknown.length > 0) throw new AppError(ErrorCodes.CONFIG_INVALID, `unknown argument ${unknown[0]}; ${USAGE}`);
  const config = loadConfig(process.env, 'cli');
  // Migrations hold a session advisory lock: through PgBouncer (transaction pooling) they need Postgres itself.
  const url = config.DATABASE_MIGRATION_URL ?? config.DATABASE_URL;
  const target = new URL(url);
  // One merchant (MERCHANT_NO, or a file of one): the previous release's rows and writes are its. Several: none is
  // the default once the single-merchant indexes are gone (a write naming no merchant then fails).
  const numbers = config.merchants.map((m) => m.merchantNo).filter((n) => n !== '');
  const { migrateDatabase } = await import('./migrate.ts');
  const result = await migrateDatabase(url, {
    defaultMerchantNo: numbers.length === 1 ? numbers[0] : numbers.length > 1 ? null : undefined,
    finishMerchants: args.includes('--finish-merchants'),
    log: (line) => console.log(`db:migrate: ${line}`),
  });
  const where = `${target.host}${target.pathname}`;
  if (result.createdDatabase) console.log(`db:migrate: created database ${where}`);
  console.log(
    result.applied === 0
      ? `db:migrate: ${where} is up to date`
      : `db:migrate: applied ${result.applied} migration(s) to ${where}`,
  );
  if (result.finished.length > 0) {
    console.log(`db:migrate: dropped the single-merchant indexes (${result.finished.join(', ')})`);
  } else if (result.merchantKeys && result.merchantKeys.legacy.length > 0) {
    console.log(
      'db:migrate: the single-merchant unique indexes are kept for the previous release; once none of its ' +
        'processes runs, `pnpm db:migrate --finish-merchants` drops them (needed before a second merchant)',
    );
  }
} catch (e) {
  const err = coerceError(e);
  console.error(`db:migrate: ${err.message}`);
  if ((err as { code?: string }).code === 'ECONNREFUSED' || /ECONNREFUSED/.test(err.message)) {
    console.error(
      'db:migrate: Postgres is not reachable. Start it with `docker compose up -d postgres`, or set DATABASE_URL ' +
        '(DATABASE_MIGRATION_URL when DATABASE_URL points at PgBouncer).',
    );
  }
  process.exitCode = 1;
}
