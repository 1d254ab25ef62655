/**
 * The end check of a chaos run: what the sandbox finalised against what Postgres applied and what is left in
 * BullMQ. Every difference is a violation with the order it concerns; counts are returned for the report.
 */
import { Redis } from 'ioredis';
import pg from 'pg';

/** An order the platform finalised, with the state its genuine callback carried. */
export interface ExpectedOrder {
  orderNo: string;
  merchantOrderNo: string;
  kind: 'payin' | 'payout';
  amount: string;
  state: number;
}

/** An event pair that must never be applied (stale or forged). */
export interface RefusedPair {
  orderNo: string;
  state: number;
  merchantOrderNo: string;
  why: 'stale' | 'forged-unknown-order' | 'forged-amount';
}

/** Jobs of the callbacks queue by BullMQ state. */
export interface QueueCounts {
  wait: number;
  active: number;
  delayed: number;
  prioritized: number;
  paused: number;
  completed: number;
  failed: number;
}

/** Jobs by state, read from the queue's keys (`{prefix}:callbacks:*`). */
export async function queueCounts(redis: Redis, prefix: string): Promise<QueueCounts> {
  const k = (s: string) => `${prefix}:callbacks:${s}`;
  const [wait, active, paused, delayed, prioritized, completed, failed] = await Promise.all([
    redis.llen(k('wait')),
    redis.llen(k('active')),
    redis.llen(k('paused')),
    redis.zcard(k('delayed')),
    redis.zcard(k('prioritized')),
    redis.zcard(k('completed')),
    redis.zcard(k('failed')),
  ]);
  return { wait, active, delayed, prioritized, paused, completed, failed };
}

/** Jobs not yet finished. */
export function unfinished(c: QueueCounts): number {
  return c.wait + c.active + c.delayed + c.prioritized + c.paused;
}

export interface AuditResult {
  queue: QueueCounts;
  /** Attempts beyond the first, summed over jobs (transient failures and deferrals retried with backoff). */
  jobRetries: number;
  /** Times a job was found orphaned by a dead worker and run again. */
  jobStalls: number;
  /** Job results by outcome: applied (credited/succeeded/refused), duplicate, review. */
  jobOutcomes: Record<string, number>;
  /** Finalised orders not in the state their callback carried (an acknowledged callback never applied). */
  notApplied: number;
  /** Acknowledged callbacks whose job is not on the primary at the end: lost after the `success`. */
  missingAcknowledged: number;
  /** Orders with more than one ledger entry or receipt. */
  doubleApplied: number;
  credited: number;
  succeeded: number;
  refused: number;
  receipts: number;
  ledgerEntries: number;
  reviewsByCode: Record<string, number>;
  violations: string[];
}

interface OrderRow {
  merchant_order_no: string;
  kind: string;
  status: string;
  platform_order_no: string | null;
  entries: string;
  exact_entries: string;
  entry_types: string | null;
}

const EXPECTED_STATUS: Record<number, string> = { 6: 'credited', 3: 'credited', 4: 'succeeded', 5: 'refused' };
const EXPECTED_ENTRY: Record<number, string | null> = {
  6: 'payin_credit',
  3: 'payin_credit',
  4: null,
  5: 'payout_refund',
};

export async function audit(input: {
  databaseUrl: string;
  redisUrl: string;
  prefix: string;
  orders: ExpectedOrder[];
  refused: RefusedPair[];
  /** Every job id ingest acknowledged (derived from delivered callbacks). */
  jobIds: string[];
}): Promise<AuditResult> {
  const violations: string[] = [];
  const client = new pg.Client({ connectionString: input.databaseUrl });
  await client.connect();
  const redis = new Redis(input.redisUrl, { maxRetriesPerRequest: 3 });
  try {
    const { rows } = await client.query<OrderRow>(`
      select o.merchant_order_no, o.kind, o.status, o.platform_order_no,
        (select count(*) from ledger_entries l where l.order_id = o.id)::text as entries,
        (select count(*) from ledger_entries l where l.order_id = o.id and l.amount = o.amount and l.currency = o.currency)::text as exact_entries,
        (select string_agg(l.entry_type, ',') from ledger_entries l where l.order_id = o.id) as entry_types
      from orders o`);
    const byMerchantOrderNo = new Map(rows.map((r) => [r.merchant_order_no, r]));
    const receipts = await client.query<{ order_no: string; state: number; n: string }>(
      'select order_no, state, count(*)::text as n from callback_receipts group by order_no, state',
    );
    const receiptCount = new Map(receipts.rows.map((r) => [`${r.order_no}/${r.state}`, Number(r.n)]));

    let credited = 0;
    let succeeded = 0;
    let refused = 0;
    let expectedEntries = 0;
    let notApplied = 0;
    let doubleApplied = 0;
    let missingAcknowledged = 0;
    for (const o of input.orders) {
      const row = byMerchantOrderNo.get(o.merchantOrderNo);
      const want = EXPECTED_STATUS[o.state];
      const entry = EXPECTED_ENTRY[o.state] ?? null;
      if (!row) {
        violations.push(`${o.merchantOrderNo}: our order is missing`);
        continue;
      }
      if (row.status !== want) notApplied++;
      if (Number(row.entries) > 1 || (receiptCount.get(`${o.orderNo}/${o.state}`) ?? 0) > 1) doubleApplied++;
      if (row.status !== want)
        violations.push(
          `${o.merchantOrderNo} (${o.orderNo}, state ${o.state}): status ${row.status}, expected ${want}`,
        );
      if (row.status === 'credited') credited++;
      if (row.status === 'succeeded') succeeded++;
      if (row.status === 'refused') refused++;
      const entries = Number(row.entries);
      if (entry === null && entries !== 0)
        violations.push(`${o.merchantOrderNo}: ${entries} ledger entries, expected none`);
      if (entry !== null) {
        expectedEntries++;
        if (entries !== 1 || Number(row.exact_entries) !== 1 || row.entry_types !== entry) {
          violations.push(
            `${o.merchantOrderNo}: ledger ${row.entry_types ?? 'empty'} (${entries}, ${row.exact_entries} at the order's amount), expected one ${entry}`,
          );
        }
      }
      const n = receiptCount.get(`${o.orderNo}/${o.state}`) ?? 0;
      if (n !== 1) violations.push(`${o.orderNo}/${o.state}: ${n} receipts, expected exactly one`);
      if (row.platform_order_no !== null && row.platform_order_no !== o.orderNo) {
        violations.push(`${o.merchantOrderNo}: platform order number ${row.platform_order_no}, expected ${o.orderNo}`);
      }
    }
    for (const p of input.refused) {
      if (p.why === 'forged-amount') continue; // same pair as the genuine event: its single receipt is checked above
      const n = receiptCount.get(`${p.orderNo}/${p.state}`) ?? 0;
      if (n !== 0) violations.push(`${p.why} event ${p.orderNo}/${p.state} was applied (${n} receipts)`);
    }
    const totalEntries = Number(
      (await client.query<{ n: string }>('select count(*)::text as n from ledger_entries')).rows[0]?.n,
    );
    const totalReceipts = receipts.rows.reduce((s, r) => s + Number(r.n), 0);
    if (totalEntries !== expectedEntries)
      violations.push(
        `ledger has ${totalEntries} entries, expected ${expectedEntries} (credited pay-ins + refused payouts)`,
      );
    if (totalReceipts !== input.orders.length)
      violations.push(`${totalReceipts} receipts, expected ${input.orders.length} (one per finalised order)`);

    const reviewRows = await client.query<{ reason_code: string; order_no: string; state: number }>(
      "select reason_code, order_no, state from reviews where status = 'open'",
    );
    const reviewsByCode: Record<string, number> = {};
    for (const r of reviewRows.rows) reviewsByCode[r.reason_code] = (reviewsByCode[r.reason_code] ?? 0) + 1;
    for (const p of input.refused.filter((x) => x.why === 'forged-unknown-order')) {
      if (!reviewRows.rows.some((r) => r.order_no === p.orderNo && r.reason_code === 'VERIFY_ORDER_UNKNOWN')) {
        violations.push(`forged callback for unknown order ${p.merchantOrderNo} has no VERIFY_ORDER_UNKNOWN review`);
      }
    }

    const queue = await queueCounts(redis, input.prefix);
    if (queue.failed !== 0) {
      const failed = await redis.zrange(`${input.prefix}:callbacks:failed`, 0, 9);
      violations.push(`${queue.failed} failed jobs (first: ${failed.join(', ')})`);
    }
    if (unfinished(queue) !== 0) violations.push(`${unfinished(queue)} jobs not finished: ${JSON.stringify(queue)}`);

    let jobRetries = 0;
    let jobStalls = 0;
    const jobOutcomes: Record<string, number> = {};
    const pipeline = redis.pipeline();
    for (const id of input.jobIds)
      pipeline.hmget(`${input.prefix}:callbacks:${id}`, 'atm', 'stc', 'returnvalue', 'finishedOn');
    const results = (await pipeline.exec()) ?? [];
    // A job that ends in review is removed so its id is free for a genuine callback of the same pair (worker's
    // releaseReviewedJobIds); such a job may be gone, but only for a refused pair whose review is in Postgres.
    const reviewedPairs = new Set(reviewRows.rows.map((r) => `${r.order_no}/${r.state}`));
    const refusedJobIds = new Map(input.refused.map((p) => [`${p.orderNo}/${p.state}`, p]));
    results.forEach(([err, value], i) => {
      const [atm, stc, returnvalue, finishedOn] = (err ? [] : (value as (string | null)[])) as (
        string | null | undefined
      )[];
      const id = input.jobIds[i] ?? '';
      // The contract id, or ingest's variant of it for another record of the same pair (`{id}-{16 hex}`): a forged
      // amount for an applied pair ends in review (VERIFY_DIFFERS_FROM_APPLIED) and its job id is released too.
      const pair = /^(?:payin|payout)-(.+?)-(\d+)(?:-[0-9a-f]{16})?$/.exec(id);
      const pairKey = pair ? `${pair[1]}/${pair[2]}` : '';
      if (!finishedOn && atm === null && refusedJobIds.has(pairKey) && reviewedPairs.has(pairKey)) {
        jobOutcomes['review (job id released)'] = (jobOutcomes['review (job id released)'] ?? 0) + 1;
        return;
      }
      if (!finishedOn) {
        if (atm === null && !returnvalue) missingAcknowledged++;
        violations.push(`acknowledged job ${id} is missing or unfinished`);
        return;
      }
      jobRetries += Math.max(0, Number(atm ?? 1) - 1);
      jobStalls += Number(stc ?? 0);
      let outcome = 'unknown';
      try {
        const r = JSON.parse(returnvalue ?? 'null') as { status?: string; outcome?: string } | null;
        outcome = r?.status === 'applied' ? `applied:${r.outcome}` : (r?.status ?? 'unknown');
      } catch {
        // keep 'unknown'
      }
      jobOutcomes[outcome] = (jobOutcomes[outcome] ?? 0) + 1;
    });

    return {
      queue,
      jobRetries,
      jobStalls,
      jobOutcomes,
      notApplied,
      missingAcknowledged,
      doubleApplied,
      credited,
      succeeded,
      refused,
      receipts: totalReceipts,
      ledgerEntries: totalEntries,
      reviewsByCode,
      violations,
    };
  } finally {
    await client.end();
    redis.disconnect();
  }
}
