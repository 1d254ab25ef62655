ALTER TABLE "operator_actions" ADD COLUMN "via" text;--> statement-breakpoint
CREATE INDEX "orders_customer_id_idx" ON "orders" USING btree ("customer_id","id") WHERE "orders"."customer_id" is not null;--> statement-breakpoint
-- Completing a pending intent may set its outcome and details only: how the actor came in stays as written.
CREATE OR REPLACE FUNCTION operator_actions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE'
     AND OLD.outcome = 'pending' AND NEW.outcome <> 'pending'
     AND NEW.id = OLD.id AND NEW.at = OLD.at AND NEW.operator = OLD.operator AND NEW.role = OLD.role
     AND NEW.action = OLD.action AND NEW.target = OLD.target AND NEW.reason = OLD.reason
     AND NEW.request_id IS NOT DISTINCT FROM OLD.request_id AND NEW.via IS NOT DISTINCT FROM OLD.via THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'operator_actions is append-only (% refused)', TG_OP USING ERRCODE = 'restrict_violation';
END;
$$;
