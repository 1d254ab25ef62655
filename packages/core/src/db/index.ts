export * from './schema.ts';
export { createDb, type CreateDbOptions, type Database, type Db, type Schema } from './client.ts';
export {
  ensureDatabase,
  migrateDatabase,
  MIGRATIONS_FOLDER,
  type MigrateOptions,
  type MigrateResult,
} from './migrate.ts';
export { LEGACY_INDEXES, MERCHANT_KEYS_MIGRATION, readMerchantKeys, type MerchantKeysStatus } from './merchant-keys.ts';
export {
  readSchemaStatus,
  requireMigratedSchema,
  shippedMigrations,
  type SchemaStatus,
  type ShippedMigration,
} from './schema-version.ts';
export { merchantPauseOf, readMerchantPauses } from './merchant-pauses.ts';
