-- Operating several merchants (issue 51): who paused which merchant (merchant_pauses), each merchant's callbacks per
-- minute (merchant_minutes, the console's 24-hour picture), and the merchant of each audited action. The two indexes
-- by merchant on the big tables, callback_arrivals_merchant_received_idx and order_events_merchant_id_idx, are not
-- built here, inside drizzle's transaction, where they would block the writes of a running deployment: the merchant
-- keys step of `pnpm db:migrate` (packages/core/src/db/merchant-keys.ts) builds them CONCURRENTLY.
CREATE TABLE "merchant_minutes" (
	"merchant_no" text NOT NULL,
	"minute" timestamp with time zone NOT NULL,
	"received" integer NOT NULL,
	"credited" integer NOT NULL,
	"failed" integer NOT NULL,
	"credit_p99_ms" integer,
	CONSTRAINT "merchant_minutes_merchant_no_minute_pk" PRIMARY KEY("merchant_no","minute")
);
--> statement-breakpoint
CREATE TABLE "merchant_pauses" (
	"merchant_no" text PRIMARY KEY NOT NULL,
	"paused_by" text NOT NULL,
	"reason" text NOT NULL,
	"since" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "operator_actions" ADD COLUMN "merchant_no" text;--> statement-breakpoint
CREATE INDEX "operator_actions_merchant_idx" ON "operator_actions" USING btree ("merchant_no","id");
--> statement-breakpoint
-- The apps' role (migration 0007): the console pauses (INSERT, or UPDATE of the reason on a second pause) and resumes
-- (DELETE); workers and ingest read. The console rolls minutes up (INSERT ... ON CONFLICT DO UPDATE) and reads them.
GRANT SELECT, INSERT, UPDATE, DELETE ON "merchant_pauses" TO mcb_app;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON "merchant_minutes" TO mcb_app;
--> statement-breakpoint
-- A row's merchant never changes once written, for every role (the apps' role may UPDATE these tables' other
-- columns): moving an order, a review or an arrival to another merchant would settle it on another number's callbacks.
CREATE FUNCTION mcb_keep_merchant_no() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.merchant_no IS DISTINCT FROM OLD.merchant_no THEN
    RAISE EXCEPTION '%.merchant_no cannot change (% to %)', TG_TABLE_NAME, OLD.merchant_no, NEW.merchant_no
      USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER orders_keep_merchant_no BEFORE UPDATE OF merchant_no ON orders
  FOR EACH ROW EXECUTE FUNCTION mcb_keep_merchant_no();
--> statement-breakpoint
CREATE TRIGGER reviews_keep_merchant_no BEFORE UPDATE OF merchant_no ON reviews
  FOR EACH ROW EXECUTE FUNCTION mcb_keep_merchant_no();
--> statement-breakpoint
CREATE TRIGGER callback_arrivals_keep_merchant_no BEFORE UPDATE OF merchant_no ON callback_arrivals
  FOR EACH ROW EXECUTE FUNCTION mcb_keep_merchant_no();
