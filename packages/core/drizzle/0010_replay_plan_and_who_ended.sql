ALTER TABLE "replays" ADD COLUMN "plan_as_of" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "replays" ADD COLUMN "plan_up_to" text;--> statement-breakpoint
ALTER TABLE "replays" ADD COLUMN "ended_by" text;--> statement-breakpoint
ALTER TABLE "replays" ADD COLUMN "end_reason" text;--> statement-breakpoint
ALTER TABLE "reviews" ADD COLUMN "closed_by" text;--> statement-breakpoint
-- Replays cancelled and reviews dismissed before this migration: who and why, from their audit rows (the console's
-- role may not read the audit, and a second operator should not need it to learn who ended one).
UPDATE "replays" r SET "ended_by" = a."operator", "end_reason" = a."reason"
  FROM (SELECT DISTINCT ON ("target") "target", "operator", "reason" FROM "operator_actions"
         WHERE "action" IN ('replays.cancel', 'replays.cancelOthers') AND "outcome" = 'cancelled'
         ORDER BY "target", "id" DESC) a
 WHERE r."status" = 'cancelled' AND a."target" = 'replay:' || r."id";
--> statement-breakpoint
UPDATE "reviews" v SET "closed_by" = a."operator"
  FROM (SELECT DISTINCT ON ("target") "target", "operator" FROM "operator_actions"
         WHERE "action" = 'reviews.dismiss' AND "outcome" = 'dismissed'
         ORDER BY "target", "id" DESC) a
 WHERE v."status" = 'dismissed' AND a."target" = 'review:' || v."id";
