-- Evidence the apps cannot rewrite (issue 48). Migration 0007 let mcb_app UPDATE every column of reviews and
-- review_occurrences: a forgery review's reason, details and event could be rewritten by the apps' role with no audit
-- row. It may now name in an UPDATE only the columns the apps write (grep of every UPDATE and ON CONFLICT DO UPDATE
-- the apps and packages run on them):
-- reviews: another occurrence of an open review counts (packages/settlement/src/record-review.ts: occurrences,
--   updated_at); a re-verification or the commit resolves it (record-review.ts recordReviewAttempt, commit-sql.ts
--   SETTLE_REVIEWS_SQL: status, closed_at, updated_at, note); an operator dismisses it (apps/console/src/reviews/
--   actions.ts: status, note, closed_at, updated_at, and closed_by: who dismissed it, migration 0010). The commit's SELECT ... FOR UPDATE OF reviews needs UPDATE of
--   one column, which these are.
-- review_occurrences: another copy of the same event counts (record-review.ts: seen, last_seen_at).
-- The finding itself (kind, order_no, state, merchant_order_no, reason_code, reason, details, event, created_at, the
-- occurrence's event_hash and first_seen_at) is written once, by the INSERT.
REVOKE UPDATE ON reviews, review_occurrences FROM mcb_app;
--> statement-breakpoint
GRANT UPDATE (status, note, occurrences, updated_at, closed_at, closed_by) ON reviews TO mcb_app;
--> statement-breakpoint
GRANT UPDATE (seen, last_seen_at) ON review_occurrences TO mcb_app;
