CREATE TABLE "order_notes" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"merchant_order_no" text NOT NULL,
	"order_no" text NOT NULL,
	"state" integer NOT NULL,
	"receipt_id" bigint NOT NULL,
	"job_id" text NOT NULL,
	"applied_job_id" text,
	"topic" text NOT NULL,
	"detail" text NOT NULL,
	"details" jsonb,
	"seen" integer DEFAULT 1 NOT NULL,
	"first_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "order_notes" ADD CONSTRAINT "order_notes_receipt_id_callback_receipts_id_fk" FOREIGN KEY ("receipt_id") REFERENCES "public"."callback_receipts"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "order_notes_receipt_job_topic_key" ON "order_notes" USING btree ("receipt_id","job_id","topic");--> statement-breakpoint
CREATE INDEX "order_notes_merchant_order_no_idx" ON "order_notes" USING btree ("merchant_order_no");--> statement-breakpoint
-- The apps' role (migration 0007): the worker writes a note and counts another copy on it; the console reads them.
GRANT SELECT, INSERT, UPDATE ON "order_notes" TO mcb_app;
--> statement-breakpoint
GRANT USAGE, SELECT ON SEQUENCE "order_notes_id_seq" TO mcb_app;
