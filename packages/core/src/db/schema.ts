import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  boolean,
  check,
  foreignKey,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

/**
 * The deployment's settings about merchant numbers: one row (migration 0014). `default_merchant_no` is what a row
 * written without a merchant number gets (the column default {@link merchantNoColumn}): the one merchant of a
 * deployment migrated from a single-merchant release (`pnpm db:migrate` stores MERCHANT_NO), so that the old release's
 * inserts, which name no merchant, keep working during the rollout. The apps always write the merchant number.
 */
export const merchantSettings = pgTable(
  'merchant_settings',
  {
    id: boolean('id').primaryKey().default(true),
    /** The merchant number of rows written without one; null: such a write fails (NOT NULL). */
    defaultMerchantNo: text('default_merchant_no'),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [check('merchant_settings_one_row', sql`${t.id}`)],
);

/**
 * `merchant_no` of a table keyed by an order number: whose order it is. Written by every query of the apps; a row
 * written without it (the previous release's, a test's) takes `mcb_default_merchant_no()`, the stored default.
 */
const merchantNoColumn = () =>
  text('merchant_no')
    .notNull()
    .default(sql`mcb_default_merchant_no()`);

/**
 * The merchant's own orders: pay-ins (money in, credited once the platform releases it) and payouts (money out,
 * finalised as succeeded or refused). Amounts are `numeric`: exact decimals, read back as strings.
 */
export const orders = pgTable(
  'orders',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    /** Whose order: our merchant number on the platform (one deployment serves several). */
    merchantNo: merchantNoColumn(),
    merchantOrderNo: text('merchant_order_no').notNull(),
    kind: text('kind', { enum: ['payin', 'payout'] }).notNull(),
    currency: text('currency').notNull(),
    amount: numeric('amount').notNull(),
    /** The merchant's customer the order was registered for, when the shop said (searchable in the console). */
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
  // The number first: the same index finds a number across merchants (is it ambiguous?) and serves the key, which
  // ON CONFLICT (merchant_no, merchant_order_no) infers whatever the column order.
  (t) => [
    uniqueIndex('orders_merchant_order_key').on(t.merchantOrderNo, t.merchantNo),
    /** The target of the composite foreign keys that tie a receipt, a ledger entry or an event to its merchant. */
    uniqueIndex('orders_id_merchant_key').on(t.id, t.merchantNo),
    index('orders_customer_id_idx')
      .on(t.customerId, t.id)
      .where(sql`${t.customerId} is not null`),
    index('orders_merchant_pending_created_idx')
      .on(t.merchantNo, t.createdAt, t.id)
      .where(sql`${t.status} = 'pending'`),
    check('orders_amount_positive', sql`${t.amount} > 0`),
    check(
      'orders_kind_status',
      sql`(${t.kind} = 'payin' and ${t.status} in ('pending','credited'))
      or (${t.kind} = 'payout' and ${t.status} in ('pending','succeeded','refused'))`,
    ),
  ],
);

/**
 * One row per applied event pair (OrderNo, state): THE dedup guard (DESIGN invariant 2), inserted in the same
 * transaction as the credit. It is also the searchable callback log of what was applied. Never updated, and deleted
 * only by the transaction that inserted it (the commit's take-back for an order that did not move): a trigger and
 * TRUNCATE refusal of migration 0007.
 */
export const callbackReceipts = pgTable(
  'callback_receipts',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    orderNo: text('order_no').notNull(),
    state: integer('state').notNull(),
    kind: text('kind', { enum: ['payin', 'payout'] }).notNull(),
    /** The callback's MerchantNo: the merchant whose order it settled (the foreign key holds it to the order's). */
    merchantNo: text('merchant_no').notNull(),
    merchantOrderNo: text('merchant_order_no').notNull(),
    orderId: bigint('order_id', { mode: 'number' }).notNull(),
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
    // The dedup guard per merchant: the platform may reuse an OrderNo across merchant numbers.
    uniqueIndex('callback_receipts_pair_merchant_key').on(t.orderNo, t.state, t.merchantNo),
    uniqueIndex('callback_receipts_id_merchant_key').on(t.id, t.merchantNo),
    index('callback_receipts_merchant_order_no_idx').on(t.merchantOrderNo),
    foreignKey({
      name: 'callback_receipts_order_merchant_fk',
      columns: [t.orderId, t.merchantNo],
      foreignColumns: [orders.id, orders.merchantNo],
    }),
  ],
);

/**
 * Append-only ledger: at most one entry per order and entry type (a constraint, not a convention). A trigger
 * (migration 0002) refuses UPDATE and DELETE, so a posted entry can only be reversed by another entry; migration 0007
 * refuses TRUNCATE for every role, and grants the apps' role (mcb_app) SELECT and INSERT only.
 */
export const ledgerEntries = pgTable(
  'ledger_entries',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    merchantNo: merchantNoColumn(),
    orderId: bigint('order_id', { mode: 'number' }).notNull(),
    entryType: text('entry_type', { enum: ['payin_credit', 'payout_refund'] }).notNull(),
    amount: numeric('amount').notNull(),
    currency: text('currency').notNull(),
    receiptId: bigint('receipt_id', { mode: 'number' }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('ledger_entries_order_entry_type_key').on(t.orderId, t.entryType),
    check('ledger_entries_amount_positive', sql`${t.amount} > 0`),
    // Its order and its receipt are both the same merchant's: no entry posts one merchant's money on another's callback.
    foreignKey({
      name: 'ledger_entries_order_merchant_fk',
      columns: [t.orderId, t.merchantNo],
      foreignColumns: [orders.id, orders.merchantNo],
    }),
    foreignKey({
      name: 'ledger_entries_receipt_merchant_fk',
      columns: [t.receiptId, t.merchantNo],
      foreignColumns: [callbackReceipts.id, callbackReceipts.merchantNo],
    }),
  ],
);

/** Outbox of order changes, read in id order by `GET /api/events?after=`. */
export const orderEvents = pgTable(
  'order_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    merchantNo: merchantNoColumn(),
    orderId: bigint('order_id', { mode: 'number' }).notNull(),
    merchantOrderNo: text('merchant_order_no').notNull(),
    eventType: text('event_type').notNull(),
    payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('order_events_order_id_idx').on(t.orderId),
    // GET /api/events?merchant=: one merchant's feed in id order (built CONCURRENTLY by the merchant keys step).
    index('order_events_merchant_id_idx').on(t.merchantNo, t.id),
    foreignKey({
      name: 'order_events_order_merchant_fk',
      columns: [t.orderId, t.merchantNo],
      foreignColumns: [orders.id, orders.merchantNo],
    }),
  ],
);

/**
 * Events that failed verification, one open review per pair (OrderNo, state); operators re-verify or dismiss them.
 * The reason, details and event are those of the first event that opened it (the original finding, never
 * rewritten); every distinct event of the pair is in {@link reviewOccurrences}, every later decision about it in
 * {@link reviewAttempts}.
 */
export const reviews = pgTable(
  'reviews',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    kind: text('kind', { enum: ['payin', 'payout'] }).notNull(),
    /** In whose name the event came (its MerchantNo, as ingest checked it against the merchant's route). */
    merchantNo: merchantNoColumn(),
    orderNo: text('order_no').notNull(),
    state: integer('state').notNull(),
    merchantOrderNo: text('merchant_order_no').notNull(),
    /** A stable code from the error catalogue (VERIFY_AMOUNT_MISMATCH, ...). */
    reasonCode: text('reason_code').notNull(),
    reason: text('reason').notNull(),
    details: jsonb('details').$type<Record<string, unknown>>(),
    /** The first event as received (decrypted fields, amounts as text), to re-verify it later. */
    event: jsonb('event').$type<Record<string, unknown>>().notNull(),
    status: text('status', { enum: ['open', 'resolved', 'dismissed'] })
      .notNull()
      .default('open'),
    /** How many times the same event landed here while open. */
    occurrences: integer('occurrences').notNull().default(1),
    note: text('note'),
    /** The operator who dismissed it (null while open, and for a review the worker resolved). */
    closedBy: text('closed_by'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    closedAt: timestamp('closed_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('reviews_open_event_merchant_key')
      .on(t.orderNo, t.state, t.merchantNo)
      .where(sql`${t.status} = 'open'`),
    index('reviews_merchant_order_no_idx').on(t.merchantOrderNo),
  ],
);

/**
 * Each distinct event that landed in a review (a forged copy and the genuine one of the same pair are two rows):
 * the event itself (decrypted fields), the finding it met, and how often and when it was seen. Identical copies
 * (the same fields but the arrival time and source) count on one row; `event_hash` is `review_event_hash(event)`
 * (migration 0003), computed by Postgres.
 */
export const reviewOccurrences = pgTable(
  'review_occurrences',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    reviewId: bigint('review_id', { mode: 'number' })
      .notNull()
      .references(() => reviews.id),
    /** SHA-256 (hex) of the event without receivedAt and source. */
    eventHash: text('event_hash').notNull(),
    /** The first copy of this event as received (decrypted fields, amounts as text). */
    event: jsonb('event').$type<Record<string, unknown>>().notNull(),
    reasonCode: text('reason_code').notNull(),
    reason: text('reason').notNull(),
    details: jsonb('details').$type<Record<string, unknown>>(),
    /** How many copies of this event landed in the review. */
    seen: integer('seen').notNull().default(1),
    firstSeenAt: timestamp('first_seen_at', { withTimezone: true }).notNull().defaultNow(),
    lastSeenAt: timestamp('last_seen_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('review_occurrences_review_event_key').on(t.reviewId, t.eventHash)],
);

/**
 * The history of a review after it opened: each console re-verify, and each commit of its pair, with what it came
 * to. Appended, never rewritten: the review's own reason stays the original finding.
 */
export const reviewAttempts = pgTable(
  'review_attempts',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    reviewId: bigint('review_id', { mode: 'number' })
      .notNull()
      .references(() => reviews.id),
    /** What made the attempt: a console re-verify ('review'), a callback job, or the reconciliation sweep. */
    source: text('source', { enum: ['callback', 'reconcile', 'review'] }).notNull(),
    /**
     * applied: its event was confirmed and applied, the review resolved; already-applied: applied before, every
     * event of the review confirmed, resolved; kept-open: the pair is applied but some event of the review is not
     * what Get order confirms, so it stays open for a person; unconfirmed: still failing (reason_code says why).
     */
    outcome: text('outcome', { enum: ['applied', 'already-applied', 'kept-open', 'unconfirmed'] }).notNull(),
    reasonCode: text('reason_code'),
    reason: text('reason').notNull(),
    details: jsonb('details').$type<Record<string, unknown>>(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('review_attempts_review_id_idx').on(t.reviewId)],
);

/**
 * What the worker noticed about an order that is not evidence of anything: a callback for an applied pair that
 * differs from what was applied only in a field Get order does not confirm (Quantity). Either callback may be the
 * made-up one, so neither is flagged: the later one is a duplicate, and this row names both jobs (the one the
 * receipt was applied from, and the one that differed) with both values. One row per receipt, job and topic;
 * another copy of the same job counts on it.
 */
export const orderNotes = pgTable(
  'order_notes',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    merchantNo: merchantNoColumn(),
    merchantOrderNo: text('merchant_order_no').notNull(),
    orderNo: text('order_no').notNull(),
    state: integer('state').notNull(),
    /** The receipt of the pair: what was applied. */
    receiptId: bigint('receipt_id', { mode: 'number' }).notNull(),
    /** The job of the callback that differed ('' when it ran outside a job). */
    jobId: text('job_id').notNull(),
    /** The job the receipt was applied from (null: not recorded, e.g. the sweep's). */
    appliedJobId: text('applied_job_id'),
    /** What the note is about: `unconfirmed-field-differs`. */
    topic: text('topic', { enum: ['unconfirmed-field-differs'] }).notNull(),
    /** One line for a person, naming both jobs and both values. */
    detail: text('detail').notNull(),
    /** The differing fields, each with the callback's and the applied value. */
    details: jsonb('details').$type<Record<string, unknown>>(),
    /** How many copies of this job's callback met the receipt. */
    seen: integer('seen').notNull().default(1),
    firstSeenAt: timestamp('first_seen_at', { withTimezone: true }).notNull().defaultNow(),
    lastSeenAt: timestamp('last_seen_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('order_notes_receipt_job_topic_key').on(t.receiptId, t.jobId, t.topic),
    index('order_notes_merchant_order_no_idx').on(t.merchantOrderNo),
    foreignKey({
      name: 'order_notes_receipt_merchant_fk',
      columns: [t.receiptId, t.merchantNo],
      foreignColumns: [callbackReceipts.id, callbackReceipts.merchantNo],
    }),
  ],
);

/**
 * Every callback that reached the worker, one row per merchant and job id (upserted, batched, when the worker first
 * takes the job and after each attempt; a job id is unique within one merchant's queue only, and the platform may
 * reuse an OrderNo across merchants): what the console searches by merchant order number, status, code, amount and time,
 * including jobs that are still waiting or failed for good and so have no receipt. Postgres indexes serve the
 * search; Redis is never scanned. Codes and one-line reasons only, never the record.
 */
export const callbackArrivals = pgTable(
  'callback_arrivals',
  {
    jobId: text('job_id').notNull(),
    /** The merchant whose queue the job is on. */
    merchantNo: merchantNoColumn(),
    kind: text('kind', { enum: ['payin', 'payout'] }).notNull(),
    orderNo: text('order_no').notNull(),
    state: integer('state').notNull(),
    merchantOrderNo: text('merchant_order_no').notNull(),
    /** Pay-in `FiatCurrency` as the callback sent it; payout callbacks carry no amount. */
    amount: numeric('amount'),
    /** When ingest accepted it (the job's receivedAt). */
    receivedAt: timestamp('received_at', { withTimezone: true }).notNull(),
    /** When a worker first took the job. */
    firstSeenAt: timestamp('first_seen_at', { withTimezone: true }).notNull(),
    /** When the last attempt started or ended (the newest report wins). */
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull(),
    /** Attempts made, the current one included. */
    attempts: integer('attempts').notNull(),
    /** active (an attempt runs), waiting / retrying (will run again), failed (for good), applied, duplicate, review. */
    status: text('status', {
      enum: ['active', 'waiting', 'retrying', 'failed', 'applied', 'duplicate', 'review'],
    }).notNull(),
    /** The last attempt's outcome: credited / succeeded / refused when applied, the duplicate's reason, else null. */
    outcome: text('outcome'),
    /** The last attempt's error or review code (VERIFY_AMOUNT_MISMATCH, PLATFORM_HTTP_ERROR, ...). */
    lastCode: text('last_code'),
    /** One line about the last attempt (at most 300 characters). */
    lastDetail: text('last_detail'),
  },
  // Ascending indexes, read backwards for the search's newest-first order (received_at DESC, job_id DESC: a DESC
  // NULLS LAST index would not match that order, and Postgres would sort instead).
  (t) => [
    // The job id first: the same index finds a job id across merchants. A database migrated from a single-merchant
    // release builds it as a unique index (the merchant keys step) beside the old primary key on job_id alone, which
    // the previous release's ON CONFLICT (job_id) needs; --finish-merchants makes it the primary key.
    primaryKey({ name: 'callback_arrivals_merchant_job_pk', columns: [t.jobId, t.merchantNo] }),
    index('callback_arrivals_received_idx').on(t.receivedAt, t.jobId),
    // One merchant's callbacks, newest first (the console's lists and counts by merchant); built CONCURRENTLY by the
    // merchant keys step of `pnpm db:migrate`, not by migration 0016.
    index('callback_arrivals_merchant_received_idx').on(t.merchantNo, t.receivedAt, t.jobId),
    // One merchant's arrivals by their last report (applied, failed): the console's per-minute roll-up and the
    // merchants list's credit figures read minutes or an hour of them, not the day their callbacks arrived in. Built
    // CONCURRENTLY by the merchant keys step, not by migration 0017.
    index('callback_arrivals_merchant_updated_idx').on(t.merchantNo, t.updatedAt),
    index('callback_arrivals_merchant_order_no_idx').on(t.merchantOrderNo, t.receivedAt),
    index('callback_arrivals_order_no_idx').on(t.orderNo),
    index('callback_arrivals_status_idx').on(t.status, t.receivedAt, t.jobId),
    index('callback_arrivals_kind_idx').on(t.kind, t.receivedAt, t.jobId),
    index('callback_arrivals_code_idx')
      .on(t.lastCode, t.receivedAt, t.jobId)
      .where(sql`${t.lastCode} is not null`),
    index('callback_arrivals_amount_idx').on(t.amount),
  ],
);

/**
 * Replays by filter (POST /api/replays): who asked, why, for which callbacks, at what rate, and how far it got.
 * The console's replay driver re-runs the failed jobs in chunks from `cursor` on; a console that restarts picks a
 * running replay up again where `cursor` says (the lease keeps two consoles from driving one replay).
 */
export const replays = pgTable(
  'replays',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    operator: text('operator').notNull(),
    reason: text('reason').notNull(),
    /** The search filter, as the API validated it. */
    filter: jsonb('filter').$type<Record<string, unknown>>().notNull(),
    ratePerSecond: integer('rate_per_second').notNull(),
    status: text('status', { enum: ['running', 'cancelled', 'finished'] })
      .notNull()
      .default('running'),
    /** Failed jobs matching the filter when the replay started. */
    total: integer('total').notNull(),
    /** Jobs sent back to the queue so far. */
    replayed: integer('replayed').notNull().default(0),
    /** Jobs skipped: no longer failed (already retried, completed) or gone from the queue. */
    skipped: integer('skipped').notNull().default(0),
    /** The last job id handled (jobs go in job-id order). */
    cursor: text('cursor'),
    /**
     * The set it acts on, as its dry run classified it (or as it stood at the start): failed jobs matching the filter
     * whose last report is at or before `plan_as_of` and whose id is at most `plan_up_to` (null: no bound on the id).
     * Jobs that fail later, during the replay too, are not swept in.
     */
    planAsOf: timestamp('plan_as_of', { withTimezone: true, precision: 3 }),
    planUpTo: text('plan_up_to'),
    /** Who cancelled it and why (null while it runs, and when it finished by itself). */
    endedBy: text('ended_by'),
    endReason: text('end_reason'),
    /** Which console process drives it, until when (renewed while it runs). */
    leaseOwner: text('lease_owner'),
    leaseUntil: timestamp('lease_until', { withTimezone: true }),
    error: text('error'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
  },
  (t) => [
    index('replays_running_idx')
      .on(t.id)
      .where(sql`${t.status} = 'running'`),
  ],
);

/**
 * The jobs each replay sent back to the queue (one row per job, written with the chunk's progress): what the replay's
 * page and list join with callback_arrivals to say what became of them (credited, duplicate, review, failed again)
 * and for how much.
 */
export const replayJobs = pgTable(
  'replay_jobs',
  {
    replayId: bigint('replay_id', { mode: 'number' })
      .notNull()
      .references(() => replays.id),
    /** The merchant whose queue the job is on (a job id names an OrderNo, which merchants may share). */
    merchantNo: merchantNoColumn(),
    jobId: text('job_id').notNull(),
    sentAt: timestamp('sent_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.replayId, t.jobId] })],
);

/**
 * The reconciliation sweep's back-off per order: an order Get order answered "unknown" about (a refusal, an HTTP
 * 3xx/4xx, a code-0 reply without usable data) is not asked again before `next_ask_at`, the wait doubling with each
 * such answer in a row. An answer that is not "unknown" deletes the row. A row only ever delays a question; it never
 * decides anything about the order.
 */
export const reconcileUnknownOrders = pgTable('reconcile_unknown_orders', {
  orderId: bigint('order_id', { mode: 'number' })
    .primaryKey()
    .references(() => orders.id),
  /** "Unknown" answers in a row. */
  unknownCount: integer('unknown_count').notNull(),
  /** The code of the last one (PLATFORM_ERROR_CODE, PLATFORM_HTTP_ERROR, PLATFORM_BAD_RESPONSE). */
  lastCode: text('last_code').notNull(),
  lastAskedAt: timestamp('last_asked_at', { withTimezone: true }).notNull(),
  /** The sweep leaves the order out until then. */
  nextAskAt: timestamp('next_ask_at', { withTimezone: true }).notNull(),
});

/**
 * Merchants an operator paused (issue 51): a row while the merchant is paused, deleted on resume; who, why and since
 * when. The source of truth of a pause: workers hold the merchant's lane while its row exists (it survives their restarts
 * and a Redis failover); the audit (operator_actions) keeps the history of pauses and resumes.
 */
export const merchantPauses = pgTable('merchant_pauses', {
  merchantNo: text('merchant_no').primaryKey(),
  pausedBy: text('paused_by').notNull(),
  reason: text('reason').notNull(),
  since: timestamp('since', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * Per merchant and minute, what its callbacks did (issue 51's history picture): received, credited and failed for
 * good, and the callback-to-credit p99 of the minute's credits. Rolled up from callback_arrivals once a minute has
 * closed, so the picture of the last 24 hours survives restarts and reads 1,440 rows, not the arrivals themselves.
 */
export const merchantMinutes = pgTable(
  'merchant_minutes',
  {
    merchantNo: text('merchant_no').notNull(),
    /** The minute's start (UTC, seconds zero). */
    minute: timestamp('minute', { withTimezone: true }).notNull(),
    received: integer('received').notNull(),
    credited: integer('credited').notNull(),
    failed: integer('failed').notNull(),
    /** Callback-to-credit p99 of the minute's credits, in ms (null: none credited). */
    creditP99Ms: integer('credit_p99_ms'),
  },
  (t) => [primaryKey({ columns: [t.merchantNo, t.minute] })],
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
export type ReviewOccurrence = typeof reviewOccurrences.$inferSelect;
export type ReviewAttempt = typeof reviewAttempts.$inferSelect;
export type CallbackArrival = typeof callbackArrivals.$inferSelect;
export type Replay = typeof replays.$inferSelect;
export type ReconcileUnknownOrder = typeof reconcileUnknownOrders.$inferSelect;
export type MerchantSettings = typeof merchantSettings.$inferSelect;
export type MerchantPause = typeof merchantPauses.$inferSelect;
export type MerchantMinute = typeof merchantMinutes.$inferSelect;

/** The console's people's roles, least first (apps/console/src/operators/roles.ts says what each may do). */
export const PERSON_ROLES = ['viewer', 'operator', 'admin'] as const;
/** Every role an operator of the console holds: the people's, then `service`, a machine client (the shop). */
export const OPERATOR_ROLES = [...PERSON_ROLES, 'service'] as const;

/** How a console request was authenticated: a bearer token, a session cookie, or the SSO proxy's header. */
export const AUTH_METHODS = ['bearer', 'session', 'proxy'] as const;

/**
 * The operators' audit trail: one row per action that changes anything (or was refused for the role), written by
 * the console's action layer in the same transaction as the action's effect where it has one. Append-only: a
 * trigger (migration 0004) refuses UPDATE and DELETE, so a record cannot be edited away by the console's own role;
 * migration 0007 refuses TRUNCATE for every role, and grants the apps' role (mcb_app) SELECT and INSERT only.
 */
export const operatorActions = pgTable(
  'operator_actions',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
    /** The operator's name (operators file, `admin` for CONSOLE_TOKEN, or the SSO proxy's identity). */
    operator: text('operator').notNull(),
    role: text('role', { enum: OPERATOR_ROLES }).notNull(),
    /** What was done, e.g. `reviews.reverify` (apps/console/src/operators/roles.ts lists them). */
    action: text('action').notNull(),
    /** What it was done to, e.g. `review:42`, `order:MO-1`, `job:callbacks/payin-P1-6`. */
    target: text('target').notNull(),
    /** Why, as the operator wrote it; empty only for refusals that came without one and a `service` client's registrations. */
    reason: text('reason').notNull(),
    /** What happened: `applied`, `dismissed`, `denied`, `failed:<CODE>`, ... */
    outcome: text('outcome').notNull(),
    requestId: text('request_id'),
    /**
     * How the actor came in: `bearer` (a token), `session` (a cookie from /login), `proxy` (the SSO proxy's header);
     * null on rows written before it was recorded, and on an action with no request.
     */
    via: text('via', { enum: AUTH_METHODS }),
    /** Counts and ids that explain the outcome (never a body, an amount in full detail, or a key). */
    details: jsonb('details').$type<Record<string, unknown>>(),
    /**
     * The merchant number the action was about (an order's, a job's queue's, a paused merchant's); null for actions
     * about no one merchant (a login, the catalog of every merchant) and on rows written before it was recorded.
     */
    merchantNo: text('merchant_no'),
  },
  (t) => [
    index('operator_actions_operator_idx').on(t.operator, t.id),
    index('operator_actions_merchant_idx').on(t.merchantNo, t.id),
    index('operator_actions_action_idx').on(t.action, t.id),
    index('operator_actions_target_idx').on(t.target, t.id),
    index('operator_actions_at_idx').on(t.at),
  ],
);

/**
 * Console sessions ended by `POST /logout` before their expiry: a session cookie is signed and stateless, so a logged-out
 * one would otherwise keep working until it expires. Rows are kept until then (the console prunes expired ones).
 */
export const consoleRevokedSessions = pgTable(
  'console_revoked_sessions',
  {
    /** The session's id (its random nonce). */
    id: text('id').primaryKey(),
    /** When the session would have expired anyway: the row is useless after it. */
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [index('console_revoked_sessions_expires_idx').on(t.expiresAt)],
);

export type OperatorAction = typeof operatorActions.$inferSelect;
export type NewOperatorAction = typeof operatorActions.$inferInsert;
