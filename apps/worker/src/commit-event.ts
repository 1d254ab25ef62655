import { callbackReceipts, ledgerEntries, orderEvents, orders, reviews, type Database, type Order } from '@mcb/core/db';
import type { PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import { and, eq, isNull, or, sql } from 'drizzle-orm';
import type { TargetStatus } from './verify.ts';

/** What the transaction did. */
export type CommitResult =
  | { status: 'applied'; outcome: TargetStatus; receiptId: number; ledgerEntryId: number | undefined; eventId: number }
  /** The pair was applied before (receipt exists), or the order already has this outcome through another pair. */
  | { status: 'duplicate'; reason: 'receipt-exists' | 'already-final' }
  /** The order is no longer pending and not in the target status (e.g. payout succeeded, event says refused). */
  | { status: 'conflict'; currentStatus: Order['status']; currentPlatformOrderNo: string | null };

/** Input of {@link commitEvent}: a verified event, our order and Get order's confirmation. */
export interface CommitInput {
  event: CallbackJob;
  order: Order;
  confirmed: PlatformOrder;
  target: TargetStatus;
  jobId?: string | undefined;
}

/** Thrown inside the transaction to roll it back with a result. */
class Rollback {
  readonly result: CommitResult;
  constructor(result: CommitResult) {
    this.result = result;
  }
}

function instant(text: string | null | undefined): Date | null {
  if (!text) return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : new Date(ms);
}

/**
 * The spec's step 3 and 5 in ONE transaction (DESIGN invariant 2): record the pair (OrderNo, state) under its
 * unique constraint, move our order with a guarded transition, post the ledger entry, write the outbox event,
 * and resolve any open review of the pair. Either all of it commits or none of it does.
 */
export async function commitEvent(db: Database, input: CommitInput): Promise<CommitResult> {
  const { event, order, confirmed, target } = input;
  try {
    return await db.transaction(async (tx) => {
      // 1. The dedup guard: a concurrent or earlier apply of the same pair makes this insert a no-op.
      const [receipt] = await tx
        .insert(callbackReceipts)
        .values({
          orderNo: event.orderNo,
          state: event.state,
          kind: event.kind,
          merchantNo: event.merchantNo,
          merchantOrderNo: event.merchantOrderNo,
          orderId: order.id,
          payTime: instant(event.payTime),
          quantity: event.kind === 'payin' ? event.quantity : null,
          fiatAmount: event.kind === 'payin' ? event.fiatAmount : null,
          confirmedAmount: confirmed.amount,
          source: event.source,
          outcome: target,
          jobId: input.jobId ?? null,
          receivedAt: instant(event.receivedAt),
        })
        .onConflictDoNothing({ target: [callbackReceipts.orderNo, callbackReceipts.state] })
        .returning({ id: callbackReceipts.id });
      if (!receipt) throw new Rollback({ status: 'duplicate', reason: 'receipt-exists' });

      // 2. Guarded transition: only a pending order moves, and only for its own platform order.
      const [moved] = await tx
        .update(orders)
        .set({
          status: target,
          platformOrderNo: event.orderNo,
          updatedAt: sql`now()`,
          finalizedAt: sql`now()`,
        })
        .where(
          and(
            eq(orders.id, order.id),
            eq(orders.status, 'pending'),
            or(isNull(orders.platformOrderNo), eq(orders.platformOrderNo, event.orderNo)),
          ),
        )
        .returning({ id: orders.id });
      if (!moved) {
        const [current] = await tx
          .select({ status: orders.status, platformOrderNo: orders.platformOrderNo })
          .from(orders)
          .where(eq(orders.id, order.id));
        if (current?.status === target && current.platformOrderNo === event.orderNo) {
          throw new Rollback({ status: 'duplicate', reason: 'already-final' });
        }
        throw new Rollback({
          status: 'conflict',
          currentStatus: current?.status ?? order.status,
          currentPlatformOrderNo: current?.platformOrderNo ?? null,
        });
      }

      // 3. The ledger: a pay-in credits its amount; a refused payout refunds the amount held. A success moves no money here.
      let ledgerEntryId: number | undefined;
      if (target === 'credited' || target === 'refused') {
        const [entry] = await tx
          .insert(ledgerEntries)
          .values({
            orderId: order.id,
            entryType: target === 'credited' ? 'payin_credit' : 'payout_refund',
            amount: order.amount,
            currency: order.currency,
            receiptId: receipt.id,
          })
          .returning({ id: ledgerEntries.id });
        ledgerEntryId = entry!.id;
      }

      // 4. The outbox, for the merchant's other systems.
      const [outbox] = await tx
        .insert(orderEvents)
        .values({
          orderId: order.id,
          merchantOrderNo: order.merchantOrderNo,
          eventType: `${order.kind}.${target}`,
          payload: {
            merchantOrderNo: order.merchantOrderNo,
            kind: order.kind,
            status: target,
            amount: order.amount,
            currency: order.currency,
            platformOrderNo: event.orderNo,
            state: event.state,
            confirmedState: confirmed.state,
            source: event.source,
          },
        })
        .returning({ id: orderEvents.id });

      // 5. An event that once failed verification and now applies closes its open review.
      await tx
        .update(reviews)
        .set({ status: 'resolved', closedAt: sql`now()`, updatedAt: sql`now()`, note: sql`coalesce(${reviews.note}, 'applied after re-verification')` })
        .where(and(eq(reviews.orderNo, event.orderNo), eq(reviews.state, event.state), eq(reviews.status, 'open')));

      return { status: 'applied' as const, outcome: target, receiptId: receipt.id, ledgerEntryId, eventId: outbox!.id };
    });
  } catch (e) {
    if (e instanceof Rollback) return e.result;
    throw e;
  }
}
