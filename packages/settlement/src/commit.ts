import type { Database, Order } from '@mcb/core/db';
import { ErrorCodes, isAppError } from '@mcb/core/errors';
import type pg from 'pg';
import { runAlone, type Settled } from '@mcb/core/batcher';
import {
  LEDGER_OUTBOX_REVIEWS_SQL,
  LOCK_ORDERS_SQL,
  RECEIPTS_AND_ORDERS_SQL,
  receiptsAndOrdersParams,
  type ReceiptsAndOrdersRow,
} from './commit-sql.ts';
import { settleReviews, type ReviewEventRow } from './commit-reviews.ts';
import { committedAfterAll, inDoubt } from './commit-in-doubt.ts';
import { classifyError } from './retry-policy.ts';
import { heldOrders, isLockWait } from './lock-wait.ts';
import { inTransaction } from './sql.ts';
import type { CommitInput, CommitOptions, CommitResult } from './commit-types.ts';

const DEFAULT_LOCK_TIMEOUT_MS = 5000;

/**
 * The spec's step 3 and 5 for a set of verified events in ONE transaction (DESIGN invariant 2), set-based: lock the
 * orders in id order, record each pair (OrderNo, state) under its unique constraint, move each order with a guarded
 * transition, post the ledger entries, write the outbox events and settle the open reviews of the pairs. An event
 * whose order did not move (applied through another pair, or in a conflicting final state) has its receipt taken
 * back in the same transaction, as the one-event transaction used to roll back.
 *
 * The statements hold even for a set with the same order or pair twice (an order moves at most once, a pair gets
 * one receipt); {@link commitEvents} still gives each round distinct pairs and orders, so that each event sees the
 * result of the one before it, as two transactions one after the other would.
 *
 * A COMMIT whose reply is lost (the connection dropped after the server received it) is looked up on a fresh
 * connection: the receipts this transaction inserted exist exactly when it committed (their ids come from a
 * sequence and are never reused), so the caller is told what it did rather than an error it would retry into a
 * "duplicate" of its own credit.
 */
async function commitSet(
  db: Database,
  inputs: readonly CommitInput[],
  options: CommitOptions,
): Promise<CommitResult[]> {
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
  return inTransaction(
    db,
    async (client) => {
      await client.query(LOCK_ORDERS_SQL, [[...new Set(inputs.map((x) => x.order.id))]]);
      const { rows } = await client.query<ReceiptsAndOrdersRow>(
        RECEIPTS_AND_ORDERS_SQL,
        receiptsAndOrdersParams(inputs),
      );
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
    },
    {
      setup:
        Number.isFinite(lockTimeoutMs) && lockTimeoutMs > 0
          ? `SET LOCAL lock_timeout = ${Math.round(lockTimeoutMs)}`
          : undefined,
      ifCommitFails: (results, error) => committedAfterAll(db, results, error),
    },
  );
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
        : {
            status: 'conflict',
            currentStatus: now?.status ?? order.status,
            currentPlatformOrderNo: now?.platform_order_no ?? null,
          };
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
  const { rows: written } = await client.query<
    | { t: 'ledger' | 'outbox'; id: string; order_id: string; i: null; hash: null; event: null }
    | ({ t: 'review' } & ReviewEventRow)
  >(LEDGER_OUTBOX_REVIEWS_SQL, [
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
        merchantNo: x.order.merchantNo,
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
    list.map((x) => x.order.merchantNo),
  ]);
  const ledger = new Map<number, number>();
  const outbox = new Map<number, number>();
  const reviewRows: ReviewEventRow[] = [];
  for (const w of written) {
    if (w.t === 'review') reviewRows.push(w);
    else (w.t === 'ledger' ? ledger : outbox).set(Number(w.order_id), Number(w.id));
  }
  if (reviewRows.length > 0) {
    await settleReviews(client, reviewRows, (i) => ({ ...inputs[i]!, receiptId: Number(receiptOf.get(i)) }));
  }
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
 * A round that fails transiently (Postgres restarting, a serialization failure) fails every event of it with that
 * error, for the caller to retry; nothing of it was committed. A round that waited too long for a row lock (lock or
 * statement timeout) is split around the orders another transaction holds: those fail (and retry later), the others
 * commit together. A round that fails for any other reason (a constraint, a bug, one poisoned event) is split: each
 * event runs alone in its own transaction, so one bad event fails alone and its neighbours commit.
 */
export async function commitEvents(
  db: Database,
  inputs: readonly CommitInput[],
  options: CommitOptions = {},
): Promise<Settled<CommitResult>[]> {
  const settled: Settled<CommitResult>[] = new Array(inputs.length);
  let left = inputs.map((_, i) => i);
  while (left.length > 0) {
    const pairs = new Set<string>();
    const orderIds = new Set<number>();
    const round: number[] = [];
    const later: number[] = [];
    for (const i of left) {
      const { event, order } = inputs[i]!;
      const pair = `${event.merchantNo}\u0000${event.orderNo}\u0000${event.state}`;
      if (pairs.has(pair) || orderIds.has(order.id)) later.push(i);
      else {
        pairs.add(pair);
        orderIds.add(order.id);
        round.push(i);
      }
    }
    await commitRound(db, inputs, round, settled, options);
    left = later;
  }
  return settled;
}

async function commitRound(
  db: Database,
  inputs: readonly CommitInput[],
  round: number[],
  settled: Settled<CommitResult>[],
  options: CommitOptions,
  splitOnLockWait = true,
): Promise<void> {
  try {
    const results = await commitSet(
      db,
      round.map((i) => inputs[i]!),
      options,
    );
    round.forEach((i, k) => (settled[i] = { ok: true, value: results[k]! }));
  } catch (e) {
    if (isAppError(e, ErrorCodes.DB_COMMIT_IN_DOUBT)) {
      const receipts = (e.details?.receipts ?? []) as (number | null)[];
      round.forEach((i, k) => {
        const receiptId = receipts[k];
        settled[i] = { ok: false, error: typeof receiptId === 'number' ? inDoubt(receiptId, e.cause) : (e.cause ?? e) };
      });
      return;
    }
    if (round.length === 1) {
      settled[round[0]!] = { ok: false, error: e };
      return;
    }
    if (splitOnLockWait && isLockWait(e)) {
      // Which orders does another transaction hold? Those events wait (fail now, retry later); the rest commit.
      const held = await heldOrders(
        db,
        round.map((i) => inputs[i]!.order.id),
      ).catch(() => undefined);
      if (held && held.size > 0) {
        const free: number[] = [];
        for (const i of round) {
          if (held.has(inputs[i]!.order.id)) settled[i] = { ok: false, error: e };
          else free.push(i);
        }
        if (free.length > 0) await commitRound(db, inputs, free, settled, options, false);
        return;
      }
      // Nothing is held now: the wait was load, not one stuck row; retry it all later like any transient failure.
    }
    if (classifyError(e) === 'transient') {
      for (const i of round) settled[i] = { ok: false, error: e };
      return;
    }
    // Not transient and not alone: find the event at fault by committing each on its own.
    for (const i of round) {
      try {
        const [result] = await commitSet(db, [inputs[i]!], options);
        settled[i] = { ok: true, value: result! };
      } catch (one) {
        settled[i] = { ok: false, error: one };
      }
    }
  }
}

/** Commit one verified event in its own transaction (the batch of one). */
export async function commitEvent(
  db: Database,
  input: CommitInput,
  options: CommitOptions = {},
): Promise<CommitResult> {
  return runAlone((inputs) => commitEvents(db, inputs, options), input);
}
