-- Several merchant numbers in one deployment (issue 50): the ledger knows the merchant. This file is the part that
-- runs inside drizzle's transaction, and it only changes the catalogue: no table is scanned or rewritten, so writes
-- wait for it a moment only (lock_timeout bounds that wait; a timeout fails the migration, which is then run again).
-- The rest needs statements a transaction cannot hold (CREATE UNIQUE INDEX CONCURRENTLY) and is the merchant keys
-- step of `pnpm db:migrate` (packages/core/src/db/merchant-keys.ts): NOT NULL, the per-merchant unique indexes, the
-- composite foreign keys; then, once no process of the previous release runs, `--finish-merchants` drops the
-- single-merchant unique indexes (docs/deployment.md, "Several merchant numbers").
SET LOCAL lock_timeout = '10s';
--> statement-breakpoint
CREATE TABLE "merchant_settings" (
	"id" boolean PRIMARY KEY DEFAULT true NOT NULL,
	"default_merchant_no" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "merchant_settings_one_row" CHECK ("merchant_settings"."id")
);
--> statement-breakpoint
-- The merchant number of the deployment being migrated (MERCHANT_NO, set on this session by migrate.ts); none on a
-- fresh database, which has no rows to fill.
INSERT INTO "merchant_settings" ("id", "default_merchant_no")
VALUES (true, nullif(current_setting('mcb.default_merchant_no', true), ''));
--> statement-breakpoint
-- What a row written without a merchant number gets: the previous release's inserts during the rollout (they name
-- no merchant), and tests' hand-written rows. STABLE: ADD COLUMN evaluates it once and keeps the value in the
-- catalogue for every existing row (Postgres' "fast default"), so the existing rows are filled without a rewrite.
CREATE FUNCTION mcb_default_merchant_no() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT "default_merchant_no" FROM "merchant_settings" WHERE "id"
$$;
--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "merchant_no" text DEFAULT mcb_default_merchant_no();--> statement-breakpoint
ALTER TABLE "ledger_entries" ADD COLUMN "merchant_no" text DEFAULT mcb_default_merchant_no();--> statement-breakpoint
ALTER TABLE "order_events" ADD COLUMN "merchant_no" text DEFAULT mcb_default_merchant_no();--> statement-breakpoint
ALTER TABLE "reviews" ADD COLUMN "merchant_no" text DEFAULT mcb_default_merchant_no();--> statement-breakpoint
ALTER TABLE "order_notes" ADD COLUMN "merchant_no" text DEFAULT mcb_default_merchant_no();--> statement-breakpoint
ALTER TABLE "callback_arrivals" ADD COLUMN "merchant_no" text DEFAULT mcb_default_merchant_no();--> statement-breakpoint
ALTER TABLE "replay_jobs" ADD COLUMN "merchant_no" text DEFAULT mcb_default_merchant_no();--> statement-breakpoint
-- NOT NULL without a scan under an exclusive lock: these checks hold every new row now, the merchant keys step
-- validates them for the old rows (a scan that does not block writes), and SET NOT NULL then uses them.
ALTER TABLE "orders" ADD CONSTRAINT "orders_merchant_no_not_null" CHECK ("merchant_no" IS NOT NULL) NOT VALID;--> statement-breakpoint
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_entries_merchant_no_not_null" CHECK ("merchant_no" IS NOT NULL) NOT VALID;--> statement-breakpoint
ALTER TABLE "order_events" ADD CONSTRAINT "order_events_merchant_no_not_null" CHECK ("merchant_no" IS NOT NULL) NOT VALID;--> statement-breakpoint
ALTER TABLE "reviews" ADD CONSTRAINT "reviews_merchant_no_not_null" CHECK ("merchant_no" IS NOT NULL) NOT VALID;--> statement-breakpoint
ALTER TABLE "order_notes" ADD CONSTRAINT "order_notes_merchant_no_not_null" CHECK ("merchant_no" IS NOT NULL) NOT VALID;--> statement-breakpoint
ALTER TABLE "callback_arrivals" ADD CONSTRAINT "callback_arrivals_merchant_no_not_null" CHECK ("merchant_no" IS NOT NULL) NOT VALID;--> statement-breakpoint
ALTER TABLE "replay_jobs" ADD CONSTRAINT "replay_jobs_merchant_no_not_null" CHECK ("merchant_no" IS NOT NULL) NOT VALID;--> statement-breakpoint
-- The apps' role (migration 0007) evaluates the column default, which reads the setting; only the migration writes it.
GRANT SELECT ON "merchant_settings" TO mcb_app;
