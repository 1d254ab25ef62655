import type { CommitInput } from './commit-types.ts';

/**
 * The statements of the group commit (see commit.ts), apart so that tests can run them directly: each one must
 * hold its guarantee by itself, whatever the JavaScript around it makes sure of.
 */

/**
 * Step 0: lock the batch's orders in one global order (by id) before anything else is written, so that two batches
 * touching the same orders queue up instead of deadlocking. FOR NO KEY UPDATE is the lock the guarded UPDATE
 * takes anyway; it does not block the foreign-key checks of other tables' inserts.
 */
export const LOCK_ORDERS_SQL = 'SELECT id FROM orders WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE';

/** Which of the orders are locked by another transaction right now (run in a transaction that is rolled back). */
export const HELD_ORDERS_SQL = `
WITH free AS (SELECT id FROM orders WHERE id = ANY($1::bigint[]) FOR NO KEY UPDATE SKIP LOCKED)
SELECT k.id FROM unnest($1::bigint[]) AS k(id) WHERE k.id NOT IN (SELECT id FROM free)`;

/**
 * Steps 1 and 2 in one statement. The receipt insert is the dedup guard (unique (order_no, state, merchant_no): the
 * platform may reuse an OrderNo across our merchant numbers, and each is applied once); an order moves
 * only where this statement inserted the receipt, only from pending, only for its own platform order, and at most
 * once: of the events holding a new receipt for one order, only the first (by index) may move it, and `moved` names
 * that event, so a second event of the same order is never reported as moved (a payout's 4 and 5 in one statement:
 * one moves it, the other is taken back as a conflict). A pair held twice gets one receipt, owned by its first event.
 * Receipts are inserted in key order (OrderNo, state, merchant): concurrent batches take the unique index's locks in
 * one order. The receipt's merchant is the event's and its order's: the foreign key (order_id, merchant_no) refuses
 * anything else, and the order moves only where it is that merchant's.
 */
export const RECEIPTS_AND_ORDERS_SQL = `
WITH v AS (
  SELECT * FROM unnest($1::int[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                       $8::timestamptz[], $9::numeric[], $10::numeric[], $11::numeric[], $12::text[], $13::text[],
                       $14::text[], $15::timestamptz[])
    AS v(i, order_no, state, kind, merchant_no, merchant_order_no, order_id, pay_time, quantity, fiat_amount,
         confirmed_amount, source, outcome, job_id, received_at)
),
ins AS (
  INSERT INTO callback_receipts (order_no, state, kind, merchant_no, merchant_order_no, order_id, pay_time, quantity,
                                 fiat_amount, confirmed_amount, source, outcome, job_id, received_at)
  SELECT DISTINCT ON (order_no, state, merchant_no) order_no, state, kind, merchant_no, merchant_order_no, order_id,
         pay_time, quantity, fiat_amount, confirmed_amount, source, outcome, job_id, received_at
    FROM v ORDER BY order_no, state, merchant_no, i
  ON CONFLICT (merchant_no, order_no, state) DO NOTHING
  RETURNING id, order_no, state, merchant_no
),
owner AS (
  SELECT DISTINCT ON (v.order_no, v.state, v.merchant_no) v.i, v.order_id, ins.id AS receipt_id
    FROM v JOIN ins ON ins.order_no = v.order_no AND ins.state = v.state AND ins.merchant_no = v.merchant_no
   ORDER BY v.order_no, v.state, v.merchant_no, v.i
),
mover AS (
  SELECT min(i) AS i FROM owner GROUP BY order_id
),
moved AS (
  UPDATE orders o
     SET status = v.outcome, platform_order_no = v.order_no, updated_at = now(), finalized_at = now()
    FROM v JOIN mover ON mover.i = v.i
   WHERE o.id = v.order_id AND o.merchant_no = v.merchant_no AND o.status = 'pending'
     AND (o.platform_order_no IS NULL OR o.platform_order_no = v.order_no)
  RETURNING v.i
)
SELECT v.i, owner.receipt_id, moved.i IS NOT NULL AS moved
  FROM v LEFT JOIN owner ON owner.i = v.i
         LEFT JOIN moved ON moved.i = v.i
 ORDER BY v.i`;

/** A row of {@link RECEIPTS_AND_ORDERS_SQL}: per event (by index), the receipt it inserted and whether it moved its order. */
export interface ReceiptsAndOrdersRow {
  i: number;
  receipt_id: string | null;
  moved: boolean;
}

function instant(text: string | null | undefined): string | null {
  if (!text) return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : new Date(ms).toISOString();
}

/** The parameters of {@link RECEIPTS_AND_ORDERS_SQL} for a set of events (one array per column). */
export function receiptsAndOrdersParams(inputs: readonly CommitInput[]): unknown[] {
  return [
    inputs.map((_, i) => i),
    inputs.map((x) => x.event.orderNo),
    inputs.map((x) => x.event.state),
    inputs.map((x) => x.event.kind),
    inputs.map((x) => x.event.merchantNo),
    inputs.map((x) => x.event.merchantOrderNo),
    inputs.map((x) => x.order.id),
    inputs.map((x) => instant(x.event.payTime)),
    inputs.map((x) => (x.event.kind === 'payin' ? x.event.quantity : null)),
    inputs.map((x) => (x.event.kind === 'payin' ? x.event.fiatAmount : null)),
    inputs.map((x) => x.confirmed.amount),
    inputs.map((x) => x.event.source),
    inputs.map((x) => x.target),
    inputs.map((x) => x.jobId ?? null),
    inputs.map((x) => instant(x.event.receivedAt)),
  ];
}

/**
 * Steps 3, 4 and 5 in one statement: ledger entries (a pay-in credit, a refused payout's refund), the outbox, and
 * the open reviews of the applied pairs with each of their distinct events, locked: commit.ts decides which of them
 * the confirmation settles (only a review whose every event Get order confirms is resolved as applied). Each row
 * names its merchant, whose order and receipt it points at (composite foreign keys), and only that merchant's
 * reviews of the pair are settled.
 */
export const LEDGER_OUTBOX_REVIEWS_SQL = `
WITH v AS (
  SELECT * FROM unnest($1::int[], $2::bigint[], $3::text[], $4::numeric[], $5::text[], $6::bigint[], $7::text[],
                       $8::text[], $9::jsonb[], $10::text[], $11::int[], $12::text[])
    AS v(i, order_id, entry_type, amount, currency, receipt_id, merchant_order_no, event_type, payload, order_no, state,
         merchant_no)
),
l AS (
  INSERT INTO ledger_entries (merchant_no, order_id, entry_type, amount, currency, receipt_id)
  SELECT merchant_no, order_id, entry_type, amount, currency, receipt_id FROM v WHERE entry_type IS NOT NULL ORDER BY i
  RETURNING id, order_id
),
e AS (
  INSERT INTO order_events (merchant_no, order_id, merchant_order_no, event_type, payload)
  SELECT merchant_no, order_id, merchant_order_no, event_type, payload FROM v ORDER BY i
  RETURNING id, order_id
),
r AS (
  SELECT reviews.id, v.i
    FROM reviews JOIN v ON reviews.order_no = v.order_no AND reviews.state = v.state AND reviews.merchant_no = v.merchant_no
   WHERE reviews.status = 'open'
   ORDER BY reviews.id
     FOR UPDATE OF reviews
)
SELECT 'ledger' AS t, id, order_id, NULL::int AS i, NULL::text AS hash, NULL::jsonb AS event FROM l
UNION ALL
SELECT 'outbox' AS t, id, order_id, NULL, NULL, NULL FROM e
UNION ALL
SELECT 'review' AS t, r.id, NULL, r.i, o.event_hash, o.event FROM r LEFT JOIN review_occurrences o ON o.review_id = r.id`;

/**
 * Close the reviews that the applied confirmation settles (every event of theirs confirmed), and add an attempt to
 * the history of each review of an applied pair, resolved or left open.
 */
export const SETTLE_REVIEWS_SQL = `
WITH a AS (
  SELECT * FROM unnest($1::bigint[], $2::boolean[], $3::text[], $4::text[], $5::text[], $6::jsonb[])
    AS a(review_id, resolve, source, reason_code, reason, details)
),
closed AS (
  UPDATE reviews
     SET status = 'resolved', closed_at = now(), updated_at = now(), note = coalesce(reviews.note, 'applied after re-verification')
    FROM a
   WHERE reviews.id = a.review_id AND a.resolve AND reviews.status = 'open'
  RETURNING reviews.id
)
INSERT INTO review_attempts (review_id, source, outcome, reason_code, reason, details)
SELECT review_id, source, CASE WHEN resolve THEN 'applied' ELSE 'kept-open' END, reason_code, reason, details FROM a`;
