/**
 * Postgres: where the apps connect, and where migrations connect (docs/deployment.md, "Database roles").
 */
import { optionalUrl, url } from './fields.ts';

/** The database area of the config schema (composed in index.ts). */
export const databaseFields = {
  /**
   * Postgres connection string. In production the worker's and the console's own login role, a member of `mcb_app`
   * (migration 0007; docs/deployment.md, "Database roles"), never the tables' owner.
   */
  DATABASE_URL: url(['postgres:', 'postgresql:'], 'postgres').default(
    'postgres://postgres@127.0.0.1:5432/merchant_callbacks',
  ),
  /**
   * Where `pnpm db:migrate` connects: as the tables' owner (the apps' DATABASE_URL role may not change the schema), and
   * at Postgres itself when DATABASE_URL points at PgBouncer (migrations hold a session advisory lock, which
   * transaction pooling cannot keep). @defaultValue DATABASE_URL
   */
  DATABASE_MIGRATION_URL: optionalUrl(['postgres:', 'postgresql:'], 'postgres'),
};
