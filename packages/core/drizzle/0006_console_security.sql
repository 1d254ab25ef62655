CREATE TABLE "console_revoked_sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE INDEX "console_revoked_sessions_expires_idx" ON "console_revoked_sessions" USING btree ("expires_at");--> statement-breakpoint
-- An action whose effect commits on its own (a re-verify, a sweep, a dashboard retry) first writes its audit row as
-- an intent (outcome 'pending'), then completes it: the one change the append-only trail allows is that pending
-- outcome (and its details) becoming the final one, once. Who, what, why and when never change; nothing is deleted.
CREATE OR REPLACE FUNCTION operator_actions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE'
     AND OLD.outcome = 'pending' AND NEW.outcome <> 'pending'
     AND NEW.id = OLD.id AND NEW.at = OLD.at AND NEW.operator = OLD.operator AND NEW.role = OLD.role
     AND NEW.action = OLD.action AND NEW.target = OLD.target AND NEW.reason = OLD.reason
     AND NEW.request_id IS NOT DISTINCT FROM OLD.request_id THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'operator_actions is append-only (% refused)', TG_OP USING ERRCODE = 'restrict_violation';
END;
$$;
