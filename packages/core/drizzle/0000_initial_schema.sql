CREATE TABLE "callback_receipts" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"order_no" text NOT NULL,
	"state" integer NOT NULL,
	"kind" text NOT NULL,
	"merchant_no" text NOT NULL,
	"merchant_order_no" text NOT NULL,
	"order_id" bigint NOT NULL,
	"pay_time" timestamp with time zone,
	"quantity" numeric,
	"fiat_amount" numeric,
	"confirmed_amount" numeric NOT NULL,
	"source" text NOT NULL,
	"outcome" text NOT NULL,
	"job_id" text,
	"received_at" timestamp with time zone,
	"applied_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "catalog_snapshots" (
	"scope" text PRIMARY KEY NOT NULL,
	"catalog" jsonb NOT NULL,
	"fetched_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "ledger_entries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"order_id" bigint NOT NULL,
	"entry_type" text NOT NULL,
	"amount" numeric NOT NULL,
	"currency" text NOT NULL,
	"receipt_id" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "order_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"order_id" bigint NOT NULL,
	"merchant_order_no" text NOT NULL,
	"event_type" text NOT NULL,
	"payload" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "orders" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"merchant_order_no" text NOT NULL,
	"kind" text NOT NULL,
	"currency" text NOT NULL,
	"amount" numeric NOT NULL,
	"customer_id" text,
	"payment_method" integer,
	"payout_params" jsonb,
	"status" text DEFAULT 'pending' NOT NULL,
	"platform_order_no" text,
	"request_hash" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finalized_at" timestamp with time zone,
	CONSTRAINT "orders_amount_positive" CHECK ("orders"."amount" > 0),
	CONSTRAINT "orders_kind_status" CHECK (("orders"."kind" = 'payin' and "orders"."status" in ('pending','credited'))
      or ("orders"."kind" = 'payout' and "orders"."status" in ('pending','succeeded','refused')))
);
--> statement-breakpoint
CREATE TABLE "reviews" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"order_no" text NOT NULL,
	"state" integer NOT NULL,
	"merchant_order_no" text NOT NULL,
	"reason_code" text NOT NULL,
	"reason" text NOT NULL,
	"details" jsonb,
	"event" jsonb NOT NULL,
	"status" text DEFAULT 'open' NOT NULL,
	"occurrences" integer DEFAULT 1 NOT NULL,
	"note" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"closed_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "callback_receipts" ADD CONSTRAINT "callback_receipts_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_entries_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ledger_entries" ADD CONSTRAINT "ledger_entries_receipt_id_callback_receipts_id_fk" FOREIGN KEY ("receipt_id") REFERENCES "public"."callback_receipts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "order_events" ADD CONSTRAINT "order_events_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "callback_receipts_order_no_state_key" ON "callback_receipts" USING btree ("order_no","state");--> statement-breakpoint
CREATE INDEX "callback_receipts_merchant_order_no_idx" ON "callback_receipts" USING btree ("merchant_order_no");--> statement-breakpoint
CREATE UNIQUE INDEX "ledger_entries_order_entry_type_key" ON "ledger_entries" USING btree ("order_id","entry_type");--> statement-breakpoint
CREATE INDEX "order_events_order_id_idx" ON "order_events" USING btree ("order_id");--> statement-breakpoint
CREATE UNIQUE INDEX "orders_merchant_order_no_key" ON "orders" USING btree ("merchant_order_no");--> statement-breakpoint
CREATE INDEX "orders_pending_created_idx" ON "orders" USING btree ("created_at") WHERE "orders"."status" = 'pending';--> statement-breakpoint
CREATE UNIQUE INDEX "reviews_open_event_key" ON "reviews" USING btree ("order_no","state") WHERE "reviews"."status" = 'open';--> statement-breakpoint
CREATE INDEX "reviews_merchant_order_no_idx" ON "reviews" USING btree ("merchant_order_no");