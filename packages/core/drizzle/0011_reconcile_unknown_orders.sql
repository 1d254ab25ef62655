CREATE TABLE "reconcile_unknown_orders" (
	"order_id" bigint PRIMARY KEY NOT NULL,
	"unknown_count" integer NOT NULL,
	"last_code" text NOT NULL,
	"last_asked_at" timestamp with time zone NOT NULL,
	"next_ask_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "reconcile_unknown_orders" ADD CONSTRAINT "reconcile_unknown_orders_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
-- The apps' role (migration 0007): the sweep reads the back-off, writes it on an "unknown" answer and deletes it on
-- any other answer.
GRANT SELECT, INSERT, UPDATE, DELETE ON "reconcile_unknown_orders" TO mcb_app;
