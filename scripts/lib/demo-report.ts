/**
 * The demo's summary and its checks, read from Postgres (and the queue's failed set) for this run's orders only,
 * compared with what the run asked the sandbox to do. Every number printed comes from the database, except
 * "received", which is what the sandbox saw ingest acknowledge.
 */
import { merchantKeys } from '@mcb/core/queue';
import { PayinState, PayoutState } from '@mcb/core/spec';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import type { DemoRun } from './demo-driver.ts';

/** One check and whether it held. */
export interface Check {
  name: string;
  ok: boolean;
  /** Why it failed (counts, order numbers), empty when it held. */
  detail: string;
}

/** What `pnpm demo` prints at the end (also written as JSON with `--summary-file`). */
export interface DemoSummary {
  /** The merchant of the run, with several (`--merchants`); absent with one. */
  merchant?: { ref: string; merchantNo: string };
  runId: string;
  orders: number;
  /** Callback POSTs ingest acknowledged with `success` (every copy of every attempt, forged ones included). */
  received: number;
  /** Callback attempts that were not acknowledged (expected 0). */
  failedAttempts: number;
  credited: number;
  payoutsSucceeded: number;
  /** Payout refund ledger entries (= refused payouts). */
  refunds: number;
  refusedPayouts: number;
  /** Acknowledged callbacks that changed nothing: received − events applied − forged callbacks. */
  duplicatesDropped: number;
  /** Forged callbacks in review with the expected code, with nothing paid for them. */
  forgeriesCaught: number;
  forgeriesSent: number;
  /** Callback-to-credit latency of pay-ins: start of the delivering attempt → receipts.applied_at, in ms. */
  latencyMs: { p50: number; p99: number; max: number; count: number };
  durationMs: number;
  checks: Check[];
  ok: boolean;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? 0;
}

function sameSet(a: readonly string[], b: readonly string[]): string {
  const sa = new Set(a);
  const sb = new Set(b);
  const missing = [...sb].filter((x) => !sa.has(x));
  const extra = [...sa].filter((x) => !sb.has(x));
  if (missing.length === 0 && extra.length === 0) return '';
  return [
    missing.length
      ? `missing ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ` (+${missing.length - 5})` : ''}`
      : '',
    extra.length
      ? `unexpected ${extra.slice(0, 5).join(', ')}${extra.length > 5 ? ` (+${extra.length - 5})` : ''}`
      : '',
  ]
    .filter(Boolean)
    .join('; ');
}

interface OrderRow {
  merchant_order_no: string;
  merchant_no: string;
  kind: 'payin' | 'payout';
  status: string;
  amount: string;
  credits: number;
  refunds: number;
  credits_ok: number;
  refunds_ok: number;
}

/**
 * Query the database and the queue, compute the summary and run every check. With `merchant` (one of several), its
 * own queue's failed set is read and every order must be booked to its number.
 */
export async function buildSummary(
  pool: pg.Pool,
  redis: Redis,
  queuePrefix: string,
  run: DemoRun,
  merchant?: { ref: string; merchantNo: string },
): Promise<DemoSummary> {
  const like = `${run.plan.runId}-%`;
  const { rows: orderRows } = await pool.query<OrderRow>(
    `select o.merchant_order_no, o.merchant_no, o.kind, o.status, o.amount::text as amount,
            count(l.*) filter (where l.entry_type = 'payin_credit')::int as credits,
            count(l.*) filter (where l.entry_type = 'payout_refund')::int as refunds,
            count(l.*) filter (where l.entry_type = 'payin_credit' and l.amount = o.amount and l.currency = o.currency)::int as credits_ok,
            count(l.*) filter (where l.entry_type = 'payout_refund' and l.amount = o.amount and l.currency = o.currency)::int as refunds_ok
       from orders o left join ledger_entries l on l.order_id = o.id
      where o.merchant_order_no like $1
      group by o.id`,
    [like],
  );
  const { rows: receipts } = await pool.query<{
    order_no: string;
    state: number;
    merchant_order_no: string;
    kind: string;
    applied_ms: string;
  }>(
    `select order_no, state, merchant_order_no, kind, (extract(epoch from applied_at) * 1000)::bigint::text as applied_ms
       from callback_receipts where merchant_order_no like $1`,
    [like],
  );
  const { rows: reviewRows } = await pool.query<{
    order_no: string;
    state: number;
    reason_code: string;
    status: string;
  }>(`select order_no, state, reason_code, status from reviews where merchant_order_no like $1`, [like]);
  const keys = merchantKeys(queuePrefix, merchant?.ref);
  const failedJobs = (await redis.zrange(`${keys.prefix}:${keys.callbacksQueue}:failed`, 0, -1)).filter((id) =>
    [...run.platformOrders.values()].some((o) => id.includes(`-${o.orderNo}-`)),
  );

  const plan = run.plan.orders;
  const byNo = new Map(orderRows.map((r) => [r.merchant_order_no, r]));
  const names = (rows: readonly OrderRow[]) => rows.map((r) => r.merchant_order_no);
  const expectedCredited = plan
    .filter((o) => o.kind === 'payin' && o.finalState === PayinState.Released)
    .map((o) => o.merchantOrderNo);
  const expectedSucceeded = plan
    .filter((o) => o.kind === 'payout' && o.finalState === PayoutState.Succeeded)
    .map((o) => o.merchantOrderNo);
  const expectedRefused = plan
    .filter((o) => o.kind === 'payout' && o.finalState === PayoutState.Refused)
    .map((o) => o.merchantOrderNo);
  const credited = orderRows.filter((r) => r.kind === 'payin' && r.status === 'credited');
  const succeeded = orderRows.filter((r) => r.kind === 'payout' && r.status === 'succeeded');
  const refused = orderRows.filter((r) => r.kind === 'payout' && r.status === 'refused');
  const refunds = orderRows.reduce((n, r) => n + r.refunds, 0);

  const genuine = run.deliveries.filter((d) => d.event === 'genuine');
  const forged = run.deliveries.filter((d) => d.event === 'forged');
  const acked = run.deliveries.flatMap((d) => d.attempts).filter((a) => a.outcome === 'success').length;
  const failedAttempts = run.deliveries.flatMap((d) => d.attempts).filter((a) => a.outcome !== 'success').length;
  const forgedAcked = forged.flatMap((d) => d.attempts).filter((a) => a.outcome === 'success').length;

  const receiptKeys = receipts.map((r) => `${r.order_no}/${r.state}`);
  const expectedReceiptKeys = genuine.map((d) => `${d.orderNo}/${d.state}`);

  const caught = run.forgeries.filter((f) => {
    const review = reviewRows.find((r) => r.order_no === f.orderNo && r.state === f.state && r.status === 'open');
    const order = byNo.get(f.merchantOrderNo);
    const paidNothing =
      f.what === 'amount'
        ? order?.status === 'pending' && order.credits === 0
        : order?.status === 'succeeded' && order.refunds === 0;
    return review?.reason_code === f.expectedCode && paidNothing && !receiptKeys.includes(`${f.orderNo}/${f.state}`);
  });

  // Latency of each credited pay-in: from the start of the attempt ingest acknowledged to the receipt's commit.
  const sentAt = new Map<string, number>();
  for (const d of genuine) {
    const ok = d.attempts.find((a) => a.outcome === 'success');
    if (ok) sentAt.set(`${d.orderNo}/${d.state}`, Date.parse(ok.at));
  }
  const latencies = receipts
    .filter((r) => r.kind === 'payin')
    .map((r) => Number(r.applied_ms) - (sentAt.get(`${r.order_no}/${r.state}`) ?? Number.NaN))
    .filter((x) => Number.isFinite(x))
    .sort((a, b) => a - b);

  const check = (name: string, detail: string): Check => ({ name, ok: detail === '', detail });
  const checks: Check[] = [
    check(
      'every order of the run is registered',
      sameSet(
        names(orderRows),
        plan.map((o) => o.merchantOrderNo),
      ),
    ),
    check('every released pay-in is credited', sameSet(names(credited), expectedCredited)),
    check(
      'each credited pay-in has exactly one ledger credit, for its amount',
      credited
        .filter((r) => r.credits !== 1 || r.credits_ok !== 1)
        .map((r) => `${r.merchant_order_no}: ${r.credits} credits`)
        .join(', '),
    ),
    check('succeeded payouts are the ones the platform paid', sameSet(names(succeeded), expectedSucceeded)),
    check('refused payouts are the ones the platform refused', sameSet(names(refused), expectedRefused)),
    check(
      'refunds = refused payouts, one each, for the payout amount',
      refunds !== expectedRefused.length || refused.some((r) => r.refunds !== 1 || r.refunds_ok !== 1)
        ? `${refunds} refunds for ${expectedRefused.length} refused payouts`
        : '',
    ),
    check(
      'no ledger entry on any other order',
      orderRows
        .filter((r) => !(r.status === 'credited' || r.status === 'refused') && r.credits + r.refunds > 0)
        .map((r) => r.merchant_order_no)
        .join(', '),
    ),
    check('one receipt per genuine event, none for forged ones', sameSet(receiptKeys, expectedReceiptKeys)),
    check(
      'forged callbacks are in review and paid nothing',
      caught.length === run.forgeries.length
        ? ''
        : `${caught.length}/${run.forgeries.length} caught; reviews: ${reviewRows.map((r) => `${r.order_no}/${r.state} ${r.reason_code} ${r.status}`).join(', ') || 'none'}`,
    ),
    check(
      'no other reviews',
      reviewRows.length === run.forgeries.length
        ? ''
        : `${reviewRows.length} reviews for ${run.forgeries.length} forgeries`,
    ),
    check(
      'every callback was delivered (acknowledged by ingest)',
      run.deliveries
        .filter((d) => d.status !== 'delivered')
        .map((d) => `${d.id} ${d.status}`)
        .join(', '),
    ),
    check('no failed jobs in the queue', failedJobs.join(', ')),
    ...(merchant
      ? [
          check(
            `every order is booked to merchant ${merchant.ref}'s number (${merchant.merchantNo})`,
            orderRows
              .filter((r) => r.merchant_no !== merchant.merchantNo)
              .map((r) => `${r.merchant_order_no}: ${r.merchant_no}`)
              .join(', '),
          ),
        ]
      : []),
  ];
  const applied = receipts.length;
  return {
    ...(merchant ? { merchant } : {}),
    runId: run.plan.runId,
    orders: plan.length,
    received: acked,
    failedAttempts,
    credited: credited.length,
    payoutsSucceeded: succeeded.length,
    refunds,
    refusedPayouts: refused.length,
    duplicatesDropped: acked - applied - forgedAcked,
    forgeriesCaught: caught.length,
    forgeriesSent: run.forgeries.length,
    latencyMs: {
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      max: latencies.at(-1) ?? 0,
      count: latencies.length,
    },
    durationMs: run.finishedAt - run.startedAt,
    checks,
    ok: checks.every((c) => c.ok),
  };
}

/** The summary as the demo prints it. */
export function formatSummary(s: DemoSummary): string {
  const row = (label: string, value: string | number) => `  ${label.padEnd(44)}${value}`;
  const whose = s.merchant ? `Merchant ${s.merchant.ref} (${s.merchant.merchantNo}): summary` : 'Summary';
  return [
    `${whose} of run ${s.runId}: ${s.orders} orders in ${(s.durationMs / 1000).toFixed(1)} s`,
    row('callbacks received (acknowledged by ingest)', s.received),
    row('pay-ins credited', s.credited),
    row('duplicates dropped', s.duplicatesDropped),
    row('forgeries caught (in review, nothing paid)', `${s.forgeriesCaught} of ${s.forgeriesSent}`),
    row('payouts succeeded', s.payoutsSucceeded),
    row('refunds (refused payouts)', `${s.refunds} (${s.refusedPayouts} refused)`),
    row(
      'callback-to-credit latency',
      `p50 ${s.latencyMs.p50} ms, p99 ${s.latencyMs.p99} ms, max ${s.latencyMs.max} ms (${s.latencyMs.count} credits)`,
    ),
    row('callback attempts refused by ingest', s.failedAttempts),
    'Checks (against the database):',
    ...s.checks.map((c) => `  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}${c.ok ? '' : `: ${c.detail}`}`),
    s.ok ? 'All checks held.' : `${s.checks.filter((c) => !c.ok).length} check(s) FAILED.`,
  ].join('\n');
}

/** What `pnpm demo --merchants N` writes with `--summary-file`: each merchant's summary. */
export interface DemoMerchantsSummary {
  merchants: DemoSummary[];
  ok: boolean;
}

/** Each merchant's summary as the demo prints it, then one line for all of them. */
export function formatMerchantSummaries(all: readonly DemoSummary[]): string {
  const failed = all.filter((s) => !s.ok).map((s) => s.merchant?.ref ?? s.runId);
  return [
    ...all.map(formatSummary),
    failed.length === 0
      ? `All checks held for every merchant (${all.length}).`
      : `Checks FAILED for merchant(s) ${failed.join(', ')}.`,
  ].join('\n\n');
}
