import type { Database, Order } from '@mcb/core/db';
import type { PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import type pg from 'pg';
import type { Settled } from '@mcb/core/batcher';
import { classifyError } from './retry-policy.ts';
import { inTransaction } from './sql.ts';
import type { TargetStatus } from './verify.ts';

/** What the transaction did for one event. */
export type CommitResult =
  | { status: 'applied'; outcome: TargetStatus; receiptId: number; ledgerEntryId: number | undefined; eventId: number }
  /** The pair was applied before (receipt exists), or the order already has this outcome through another pair. */
  | { status: 'duplicate'; reason: 'receipt-exists' | 'already-final' }
  /** The order is no longer pending and not in the target status (e.g. payout succeeded, event says refused). */
  | { status: 'conflict'; currentStatus: Order['status']; currentPlatformOrderNo: string | null };

/** A verified event, our order and Get order's confirmation: what {@link commitEvents} writes. */
export interface CommitInput {
  event: CallbackJob;
  order: Order;
  confirmed: PlatformOrder;
  target: TargetStatus;
  jobId?: string | undefined;
}

function instant(text: string | null | undefined): string | null {
  if (!text) return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : new Date(ms).toISOString();
}

// Step 1 and 2 in one statement. The receipt insert is the dedup guard (unique (order_no, state)); the order moves
// only where this statement inserted the receipt, only from pending, and only for its own platform order.
// Rows are written in order id order, so that two batches touching the same orders lock them in the same order.
const RECEIPTS_AND_ORDERS_SQL = `
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
  SELECT order_no, state, kind, merchant_no, merchant_order_no, order_id, pay_time, quantity, fiat_amount,
         confirmed_amount, source, outcome, job_id, received_at
    FROM v ORDER BY order_id
  ON CONFLICT (order_no, state) DO NOTHING
  RETURNING id, order_no, state
),
moved AS (
  UPDATE orders o
     SET status = v.outcome, platform_order_no = v.order_no, updated_at = now(), finalized_at = now()
    FROM v JOIN ins ON ins.order_no = v.order_no AND ins.state = v.state
   WHERE o.id = v.order_id AND o.status = 'pending' AND (o.platform_order_no IS NULL OR o.platform_order_no = v.order_no)
  RETURNING o.id
)
SELECT v.i, ins.id AS receipt_id, moved.id IS NOT NULL AS moved
  FROM v LEFT JOIN ins ON ins.order_no = v.order_no AND ins.state = v.state
         LEFT JOIN moved ON moved.id = v.order_id
 ORDER BY v.i`;

// Step 3, 4 and 5 in one statement: ledger entries (a pay-in credit, a refused payout's refund), the outbox, and
// the open reviews of the applied pairs closed.
const LEDGER_OUTBOX_REVIEWS_SQL = `
WITH v AS (
  SELECT * FROM unnest($1::int[], $2::bigint[], $3::text[], $4::numeric[], $5::text[], $6::bigint[], $7::text[],
                       $8::text[], $9::jsonb[], $10::text[], $11::int[])
    AS v(i, order_id, entry_type, amount, currency, receipt_id, merchant_order_no, event_type, payload, order_no, state)
),
l AS (
  INSERT INTO ledger_entries (order_id, entry_type, amount, currency, receipt_id)
  SELECT order_id, entry_type, amount, currency, receipt_id FROM v WHERE entry_type IS NOT NULL ORDER BY i
  RETURNING id, order_id
),
e AS (
  INSERT INTO order_events (order_id, merchant_order_no, event_type, payload)
  SELECT order_id, merchant_order_no, event_type, payload FROM v ORDER BY i
  RETURNING id, order_id
),
r AS (
  UPDATE reviews
     SET status = 'resolved', closed_at = now(), updated_at = now(), note = coalesce(reviews.note, 'applied after re-verification')
    FROM v
   WHERE reviews.order_no = v.order_no AND reviews.state = v.state AND reviews.status = 'open'
  RETURNING reviews.id
)
SELECT 'ledger' AS t, id, order_id FROM l
UNION ALL
SELECT 'outbox' AS t, id, order_id FROM e`;

/**
 * The spec's step 3 and 5 for a set of verified events in ONE transaction (DESIGN invariant 2), set-based: record
 * each pair (OrderNo, state) under its unique constraint, move each order with a guarded transition, post the
 * ledger entries, write the outbox events and resolve the open reviews of the pairs, in two statements. An event
 * whose order did not move (applied through another pair, or in a conflicting final state) has its receipt taken
 * back in the same transaction, as the one-event transaction used to roll back.
 *
 * The events must name distinct pairs and distinct orders ({@link commitEvents} makes sure of it).
 */
async function commitSet(db: Database, inputs: readonly CommitInput[]): Promise<CommitResult[]> {
  return inTransaction(db, async (client) => {
    const { rows } = await client.query<{ i: number; receipt_id: string | null; moved: boolean }>(RECEIPTS_AND_ORDERS_SQL, [
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
    ]);
    const results: (CommitResult | undefined)[] = new Array(inputs.length);
    const moved: number[] = [];
    const unmovedReceipts: string[] = [];
    const unmovedOrders: number[] = [];
    for (const row of rows) {
      if (row.receipt_id === null) results[row.i] = { status: 'duplicate', reason: 'receipt-exists' };
      else if (row.moved) moved.push(row.i);
      else {
        unmovedReceipts.push(row.receipt_id);
        unmovedOrders.push(row.i);
      }
    }
    if (unmovedReceipts.length > 0) await settleUnmoved(client, inputs, unmovedReceipts, unmovedOrders, results);
    if (moved.length > 0) await postMoved(client, inputs, rows, moved, results);
    return results.map((r, i) => {
      if (!r) throw new Error(`group commit: no result for event ${i}`);
      return r;
    });
  });
}

/** Orders that did not move: take back their receipts, and tell duplicate (same outcome) from conflict. */
async function settleUnmoved(
  client: pg.PoolClient,
  inputs: readonly CommitInput[],
  receiptIds: string[],
  indexes: number[],
  results: (CommitResult | undefined)[],
): Promise<void> {
  await client.query('DELETE FROM callback_receipts WHERE id = ANY($1::bigint[])', [receiptIds]);
  const { rows } = await client.query<{ id: string; status: Order['status']; platform_order_no: string | null }>(
    'SELECT id, status, platform_order_no FROM orders WHERE id = ANY($1::bigint[])',
    [indexes.map((i) => inputs[i]!.order.id)],
  );
  const current = new Map(rows.map((r) => [Number(r.id), r]));
  for (const i of indexes) {
    const { event, order, target } = inputs[i]!;
    const now = current.get(order.id);
    results[i] =
      now?.status === target && now.platform_order_no === event.orderNo
        ? { status: 'duplicate', reason: 'already-final' }
        : { status: 'conflict', currentStatus: now?.status ?? order.status, currentPlatformOrderNo: now?.platform_order_no ?? null };
  }
}

/** Ledger, outbox and reviews of the orders that moved. */
async function postMoved(
  client: pg.PoolClient,
  inputs: readonly CommitInput[],
  rows: readonly { i: number; receipt_id: string | null }[],
  indexes: number[],
  results: (CommitResult | undefined)[],
): Promise<void> {
  const receiptOf = new Map(rows.map((r) => [r.i, r.receipt_id!]));
  const list = indexes.map((i) => inputs[i]!);
  const { rows: written } = await client.query<{ t: 'ledger' | 'outbox'; id: string; order_id: string }>(LEDGER_OUTBOX_REVIEWS_SQL, [
    indexes,
    list.map((x) => x.order.id),
    list.map((x) => (x.target === 'credited' ? 'payin_credit' : x.target === 'refused' ? 'payout_refund' : null)),
    list.map((x) => x.order.amount),
    list.map((x) => x.order.currency),
    indexes.map((i) => receiptOf.get(i)!),
    list.map((x) => x.order.merchantOrderNo),
    list.map((x) => `${x.order.kind}.${x.target}`),
    list.map((x) =>
      JSON.stringify({
        merchantOrderNo: x.order.merchantOrderNo,
        kind: x.order.kind,
        status: x.target,
        amount: x.order.amount,
        currency: x.order.currency,
        platformOrderNo: x.event.orderNo,
        state: x.event.state,
        confirmedState: x.confirmed.state,
        source: x.event.source,
      }),
    ),
    list.map((x) => x.event.orderNo),
    list.map((x) => x.event.state),
  ]);
  const ledger = new Map<number, number>();
  const outbox = new Map<number, number>();
  for (const w of written) (w.t === 'ledger' ? ledger : outbox).set(Number(w.order_id), Number(w.id));
  for (const i of indexes) {
    const x = inputs[i]!;
    const eventId = outbox.get(x.order.id);
    if (eventId === undefined) throw new Error(`group commit: no outbox event written for order ${x.order.id}`);
    results[i] = {
      status: 'applied',
      outcome: x.target,
      receiptId: Number(receiptOf.get(i)),
      ledgerEntryId: ledger.get(x.order.id),
      eventId,
    };
  }
}

/**
 * Commit verified events, as few transactions as possible: every event whose pair and order are not already in
 * the round goes into one set-based transaction; a later event of the same pair or order waits for the next round
 * (so it sees the first one's result, exactly as two transactions one after the other would).
 *
 * A round that fails transiently (Postgres restarting, a serialization failure, a deadlock) fails every event of
 * it with that error, for the caller to retry; nothing of it was committed. A round that fails for any other
 * reason (a constraint, a bug, one poisoned event) is split: each event runs alone in its own transaction, so one
 * bad event fails alone and its neighbours commit.
 */
export async function commitEvents(db: Database, inputs: readonly CommitInput[]): Promise<Settled<CommitResult>[]> {
  const settled: Settled<CommitResult>[] = new Array(inputs.length);
  let left = inputs.map((_, i) => i);
  while (left.length > 0) {
    const pairs = new Set<string>();
    const orderIds = new Set<number>();
    const round: number[] = [];
    const later: number[] = [];
    for (const i of left) {
      const { event, order } = inputs[i]!;
      const pair = `${event.orderNo}\u0000${event.state}`;
      if (pairs.has(pair) || orderIds.has(order.id)) later.push(i);
      else {
        pairs.add(pair);
        orderIds.add(order.id);
        round.push(i);
      }
    }
    await commitRound(db, inputs, round, settled);
    left = later;
  }
  return settled;
}

async function commitRound(db: Database, inputs: readonly CommitInput[], round: number[], settled: Settled<CommitResult>[]): Promise<void> {
  try {
    const results = await commitSet(db, round.map((i) => inputs[i]!));
    round.forEach((i, k) => (settled[i] = { ok: true, value: results[k]! }));
  } catch (e) {
    if (round.length === 1 || classifyError(e) === 'transient') {
      for (const i of round) settled[i] = { ok: false, error: e };
      return;
    }
    // Not transient and not alone: find the event at fault by committing each on its own.
    for (const i of round) {
      try {
        const [result] = await commitSet(db, [inputs[i]!]);
        settled[i] = { ok: true, value: result! };
      } catch (one) {
        settled[i] = { ok: false, error: one };
      }
    }
  }
}

/** Commit one verified event in its own transaction (the batch of one). */
export async function commitEvent(db: Database, input: CommitInput): Promise<CommitResult> {
  const [result] = await commitEvents(db, [input]);
  if (!result!.ok) throw result!.error;
  return result!.value;
}
