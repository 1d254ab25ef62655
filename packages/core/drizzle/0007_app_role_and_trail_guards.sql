-- The trail cannot be erased by the apps' own role (issue 37). Migrations run as the tables' owner
-- (DATABASE_MIGRATION_URL); the apps connect as a login role that is a member of mcb_app (docs/deployment.md), which
-- may read and add to the audit (operator_actions), the ledger (ledger_entries) and the receipts (callback_receipts)
-- but never change, delete or truncate them, and, not owning the tables, cannot disable their triggers either.
-- Roles are cluster-wide: mcb_app is created once, by the first database migrated on the server.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mcb_app') THEN
    BEGIN
      CREATE ROLE mcb_app NOLOGIN;
    EXCEPTION
      WHEN duplicate_object OR unique_violation THEN NULL; -- created meanwhile by the migration of another database
      WHEN insufficient_privilege THEN
        RAISE EXCEPTION 'migration 0007 needs the group role mcb_app, and the migration role may not create roles'
          USING ERRCODE = 'insufficient_privilege',
                HINT = 'Run "CREATE ROLE mcb_app NOLOGIN" as a role with CREATEROLE (docs/deployment.md, "Database roles"), then pnpm db:migrate again.';
    END;
  END IF;
END
$$;
--> statement-breakpoint
-- What the apps' queries need, table by table (grep of every INSERT/UPDATE/DELETE the apps and packages run):
-- append-only tables get SELECT and INSERT only; UPDATE only where a query updates (ON CONFLICT DO UPDATE included);
-- DELETE only on console_revoked_sessions and on callback_receipts, where the commit takes back the receipt it has
-- just inserted for an order that did not move (packages/settlement/src/commit.ts, settleUnmoved), and the trigger
-- below allows nothing else.
GRANT USAGE ON SCHEMA public TO mcb_app;
--> statement-breakpoint
GRANT SELECT, INSERT ON operator_actions, ledger_entries, order_events, review_attempts TO mcb_app;
--> statement-breakpoint
-- The console completes an audit intent (outcome 'pending') with its final outcome, once (migration 0006's trigger
-- allows nothing else): UPDATE of those two columns only; who, what, why and when cannot even be named in an UPDATE.
GRANT UPDATE (outcome, details) ON operator_actions TO mcb_app;
--> statement-breakpoint
-- Revoked console sessions: added on logout, read per request, expired ones purged.
GRANT SELECT, INSERT, DELETE ON console_revoked_sessions TO mcb_app;
--> statement-breakpoint
GRANT SELECT, INSERT, DELETE ON callback_receipts TO mcb_app;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON orders, reviews, review_occurrences, callback_arrivals, replays, catalog_snapshots TO mcb_app;
--> statement-breakpoint
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO mcb_app;
--> statement-breakpoint
-- The worker and the console compare the applied migrations with their own at start (schema-version.ts).
GRANT USAGE ON SCHEMA drizzle TO mcb_app;
--> statement-breakpoint
GRANT SELECT ON drizzle.__drizzle_migrations TO mcb_app;
--> statement-breakpoint
-- A receipt is the record of what was applied: never changed, and removed only by the transaction that inserted it
-- (age(xmin) = 0: the row's inserting transaction is this one), which is how the commit takes back the receipt of an
-- order that did not move. For every role, the owner included.
CREATE FUNCTION callback_receipts_keep_applied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND (SELECT age(xmin) FROM callback_receipts WHERE id = OLD.id) = 0 THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'callback_receipts keeps applied receipts (% of receipt % refused)', TG_OP, OLD.id USING ERRCODE = 'restrict_violation';
END;
$$;
--> statement-breakpoint
CREATE TRIGGER callback_receipts_keep_applied
  BEFORE UPDATE OR DELETE ON callback_receipts
  FOR EACH ROW EXECUTE FUNCTION callback_receipts_keep_applied();
--> statement-breakpoint
-- TRUNCATE bypasses row triggers: refuse it on the trail's tables for everyone (TRUNCATE ... CASCADE from orders
-- included: the trigger fires for every table truncated). A deliberate reset of a test or bench database is a
-- superuser's `SET LOCAL session_replication_role = replica` before it.
CREATE FUNCTION refuse_truncate_of_the_trail() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is part of the trail: TRUNCATE refused', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END;
$$;
--> statement-breakpoint
CREATE TRIGGER operator_actions_no_truncate BEFORE TRUNCATE ON operator_actions FOR EACH STATEMENT EXECUTE FUNCTION refuse_truncate_of_the_trail();
--> statement-breakpoint
CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries FOR EACH STATEMENT EXECUTE FUNCTION refuse_truncate_of_the_trail();
--> statement-breakpoint
CREATE TRIGGER callback_receipts_no_truncate BEFORE TRUNCATE ON callback_receipts FOR EACH STATEMENT EXECUTE FUNCTION refuse_truncate_of_the_trail();
