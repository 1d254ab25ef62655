import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  check,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

/**
 * The merchant's own orders: pay-ins (money in, credited once the platform releases it) and payouts (money out,
 * finalised as succeeded or refused). Amounts are `numeric`: exact decimals, read back as strings.
 */
export const orders = pgTable(
  'orders',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    merchantOrderNo: text('merchant_order_no').notNull(),
    kind: text('kind', { enum: ['payin', 'payout'] }).notNull(),
    currency: text('currency').notNull(),
    amount: numeric('amount').notNull(),
    customerId: text('customer_id'),
    /** Payouts: the catalog method number. */
    paymentMethod: integer('payment_method'),
    /** Payouts: the create-payout parameters keyed by apiParam. */
    payoutParams: jsonb('payout_params').$type<Record<string, string>>(),
    status: text('status', { enum: ['pending', 'credited', 'succeeded', 'refused'] })
      .notNull()
      .default('pending'),
    /** The platform's OrderNo, learnt from the first applied callback or sweep. */
    platformOrderNo: text('platform_order_no'),
    /** SHA-256 of the canonical registration body, for idempotent registration (same body → same order). */
    requestHash: text('request_hash').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    finalizedAt: timestamp('finalized_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('orders_merchant_order_no_key').on(t.merchantOrderNo),
    index('orders_pending_created_idx').on(t.createdAt).where(sql`${t.status} = 'pending'`),
    check('orders_amount_positive', sql`${t.amount} > 0`),
    check('orders_kind_status', sql`(${t.kind} = 'payin' and ${t.status} in ('pending','credited'))
      or (${t.kind} = 'payout' and ${t.status} in ('pending','succeeded','refused'))`),
  ],
);

/**
 * One row per applied event pair (OrderNo, state): THE dedup guard (DESIGN invariant 2), inserted in the same
 * transaction as the credit. It is also the searchable callback log of what was applied.
 */
export const callbackReceipts = pgTable(
  'callback_receipts',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    orderNo: text('order_no').notNull(),
    state: integer('state').notNull(),
    kind: text('kind', { enum: ['payin', 'payout'] }).notNull(),
    merchantNo: text('merchant_no').notNull(),
    merchantOrderNo: text('merchant_order_no').notNull(),
    orderId: bigint('order_id', { mode: 'number' })
      .notNull()
      .references(() => orders.id),
    /** PayTime as sent (UTC+8 local time), converted to an instant. */
    payTime: timestamp('pay_time', { withTimezone: true }),
    /** Pay-in `Quantity` (USDT), exact text. */
    quantity: numeric('quantity'),
    /** Pay-in `FiatCurrency` (the fiat amount), exact text. */
    fiatAmount: numeric('fiat_amount'),
    /** Amount confirmed by Get order. */
    confirmedAmount: numeric('confirmed_amount').notNull(),
    /** How the event reached us: a callback, the reconciliation sweep, or a re-verified review. */
    source: text('source', { enum: ['callback', 'reconcile', 'review'] }).notNull(),
    /** What applying it did to our order. */
    outcome: text('outcome', { enum: ['credited', 'succeeded', 'refused'] }).notNull(),
    jobId: text('job_id'),
    receivedAt: timestamp('received_at', { withTimezone: true }),
    appliedAt: timestamp('applied_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('callback_receipts_order_no_state_key').on(t.orderNo, t.state),
    index('callback_receipts_merchant_order_no_idx').on(t.merchantOrderNo),
  ],
);

/**
 * Append-only ledger: at most one entry per order and entry type (a constraint, not a convention). A trigger
 * (migration 0001) refuses UPDATE and DELETE, so a posted entry can only be reversed by another entry.
 */
export const ledgerEntries = pgTable(
  'ledger_entries',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    orderId: bigint('order_id', { mode: 'number' })
      .notNull()
      .references(() => orders.id),
    entryType: text('entry_type', { enum: ['payin_credit', 'payout_refund'] }).notNull(),
    amount: numeric('amount').notNull(),
    currency: text('currency').notNull(),
    receiptId: bigint('receipt_id', { mode: 'number' })
      .notNull()
      .references(() => callbackReceipts.id),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('ledger_entries_order_entry_type_key').on(t.orderId, t.entryType),
    check('ledger_entries_amount_positive', sql`${t.amount} > 0`),
  ],
);

/** Outbox of order changes, read in id order by `GET /api/events?after=`. */
export const orderEvents = pgTable(
  'order_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    orderId: bigint('order_id', { mode: 'number' })
      .notNull()
      .references(() => orders.id),
    merchantOrderNo: text('merchant_order_no').notNull(),
    eventType: text('event_type').notNull(),
    payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('order_events_order_id_idx').on(t.orderId)],
);

/** Events that failed verification, with the reason; operators re-verify or dismiss them. */
export const reviews = pgTable(
  'reviews',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    kind: text('kind', { enum: ['payin', 'payout'] }).notNull(),
    orderNo: text('order_no').notNull(),
    state: integer('state').notNull(),
    merchantOrderNo: text('merchant_order_no').notNull(),
    /** A stable code from the error catalogue (VERIFY_AMOUNT_MISMATCH, ...). */
    reasonCode: text('reason_code').notNull(),
    reason: text('reason').notNull(),
    details: jsonb('details').$type<Record<string, unknown>>(),
    /** The event as received (decrypted fields, amounts as text), to re-verify it later. */
    event: jsonb('event').$type<Record<string, unknown>>().notNull(),
    status: text('status', { enum: ['open', 'resolved', 'dismissed'] })
      .notNull()
      .default('open'),
    /** How many times the same event landed here while open. */
    occurrences: integer('occurrences').notNull().default(1),
    note: text('note'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    closedAt: timestamp('closed_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('reviews_open_event_key')
      .on(t.orderNo, t.state)
      .where(sql`${t.status} = 'open'`),
    index('reviews_merchant_order_no_idx').on(t.merchantOrderNo),
  ],
);

/** The last good payment-method catalog per scope ('' = all currencies), served with its age when the platform is down. */
export const catalogSnapshots = pgTable('catalog_snapshots', {
  scope: text('scope').primaryKey(),
  catalog: jsonb('catalog').$type<Record<string, unknown>>().notNull(),
  fetchedAt: timestamp('fetched_at', { withTimezone: true }).notNull(),
});

export type Order = typeof orders.$inferSelect;
export type NewOrder = typeof orders.$inferInsert;
export type CallbackReceipt = typeof callbackReceipts.$inferSelect;
export type LedgerEntry = typeof ledgerEntries.$inferSelect;
export type OrderEvent = typeof orderEvents.$inferSelect;
export type Review = typeof reviews.$inferSelect;
