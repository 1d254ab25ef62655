import { loadConfig } from '../config/index.ts';
import { coerceError } from '../errors.ts';
import { migrateDatabase } from './migrate.ts';

// `pnpm db:migrate`: create the database when missing, apply pending migrations, say what happened.
try {
  const config = loadConfig(process.env, 'cli');
  // Migrations hold a session advisory lock: through PgBouncer (transaction pooling) they need Postgres itself.
  const url = config.DATABASE_MIGRATION_URL ?? config.DATABASE_URL;
  const target = new URL(url);
  const result = await migrateDatabase(url);
  const where = `${target.host}${target.pathname}`;
  if (result.createdDatabase) console.log(`db:migrate: created database ${where}`);
  console.log(
    result.applied === 0
      ? `db:migrate: ${where} is up to date`
      : `db:migrate: applied ${result.applied} migration(s) to ${where}`,
  );
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
