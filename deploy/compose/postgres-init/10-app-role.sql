-- Run by the postgres image once, when it initialises its data volume (docs/deployment.md, "Database roles").
-- The group role migration 0007 grants to (it would create it too, but the apps' login role needs it first), and the
-- apps' own login role: a member of mcb_app, not the tables' owner, so it cannot erase the audit, the ledger or the
-- receipts. The compose stack authenticates by trust on its private network; give the role a password
-- (ALTER ROLE mcb_apps PASSWORD '...') and DATABASE_URL the same anywhere else.
CREATE ROLE mcb_app NOLOGIN;
CREATE ROLE mcb_apps LOGIN IN ROLE mcb_app;
