CREATE TABLE "callback_arrivals" (
	"job_id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"order_no" text NOT NULL,
	"state" integer NOT NULL,
	"merchant_order_no" text NOT NULL,
	"amount" numeric,
	"received_at" timestamp with time zone NOT NULL,
	"first_seen_at" timestamp with time zone NOT NULL,
	"updated_at" timestamp with time zone NOT NULL,
	"attempts" integer NOT NULL,
	"status" text NOT NULL,
	"outcome" text,
	"last_code" text,
	"last_detail" text
);
--> statement-breakpoint
CREATE TABLE "replays" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"operator" text NOT NULL,
	"reason" text NOT NULL,
	"filter" jsonb NOT NULL,
	"rate_per_second" integer NOT NULL,
	"status" text DEFAULT 'running' NOT NULL,
	"total" integer NOT NULL,
	"replayed" integer DEFAULT 0 NOT NULL,
	"skipped" integer DEFAULT 0 NOT NULL,
	"cursor" text,
	"lease_owner" text,
	"lease_until" timestamp with time zone,
	"error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE INDEX "callback_arrivals_received_idx" ON "callback_arrivals" USING btree ("received_at","job_id");--> statement-breakpoint
CREATE INDEX "callback_arrivals_merchant_order_no_idx" ON "callback_arrivals" USING btree ("merchant_order_no","received_at");--> statement-breakpoint
CREATE INDEX "callback_arrivals_order_no_idx" ON "callback_arrivals" USING btree ("order_no");--> statement-breakpoint
CREATE INDEX "callback_arrivals_status_idx" ON "callback_arrivals" USING btree ("status","received_at","job_id");--> statement-breakpoint
CREATE INDEX "callback_arrivals_kind_idx" ON "callback_arrivals" USING btree ("kind","received_at","job_id");--> statement-breakpoint
CREATE INDEX "callback_arrivals_code_idx" ON "callback_arrivals" USING btree ("last_code","received_at","job_id") WHERE "callback_arrivals"."last_code" is not null;--> statement-breakpoint
CREATE INDEX "callback_arrivals_amount_idx" ON "callback_arrivals" USING btree ("amount");--> statement-breakpoint
CREATE INDEX "replays_running_idx" ON "replays" USING btree ("id") WHERE "replays"."status" = 'running';