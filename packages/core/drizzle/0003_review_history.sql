CREATE TABLE "review_attempts" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"review_id" bigint NOT NULL,
	"source" text NOT NULL,
	"outcome" text NOT NULL,
	"reason_code" text,
	"reason" text NOT NULL,
	"details" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "review_occurrences" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"review_id" bigint NOT NULL,
	"event_hash" text NOT NULL,
	"event" jsonb NOT NULL,
	"reason_code" text NOT NULL,
	"reason" text NOT NULL,
	"details" jsonb,
	"seen" integer DEFAULT 1 NOT NULL,
	"first_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "review_attempts" ADD CONSTRAINT "review_attempts_review_id_reviews_id_fk" FOREIGN KEY ("review_id") REFERENCES "public"."reviews"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "review_occurrences" ADD CONSTRAINT "review_occurrences_review_id_reviews_id_fk" FOREIGN KEY ("review_id") REFERENCES "public"."reviews"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "review_attempts_review_id_idx" ON "review_attempts" USING btree ("review_id");--> statement-breakpoint
CREATE UNIQUE INDEX "review_occurrences_review_event_key" ON "review_occurrences" USING btree ("review_id","event_hash");--> statement-breakpoint
-- One definition of "the same event" for review_occurrences: the event's fields but its arrival time and source
-- (jsonb's text form is canonical: keys in one order, no insignificant spaces).
CREATE FUNCTION review_event_hash(event jsonb) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT encode(sha256(convert_to((event - 'receivedAt' - 'source')::text, 'UTF8')), 'hex')
$$;
--> statement-breakpoint
-- The reviews opened before this migration keep their one stored event as their first occurrence.
INSERT INTO "review_occurrences" ("review_id", "event_hash", "event", "reason_code", "reason", "details", "seen", "first_seen_at", "last_seen_at")
SELECT "id", review_event_hash("event"), "event", "reason_code", "reason", "details", 1, "created_at", "updated_at" FROM "reviews";
