/**
 * Search: the console's GET /api/callbacks on a database of N receipts and N callback arrivals (default 1,000,000
 * each, with N orders), filled server-side with generate_series. Each filter is asked `queries` times with varied
 * values through the console's own routes (app.inject: validation, the query, serialization) and its latency
 * summarised. Target: p99 < 100 ms for every filter.
 *
 * Data: arrivals spread over 30 days; 96 % applied, 1 % failed (PLATFORM_HTTP_ERROR), 1 % review
 * (VERIFY_AMOUNT_MISMATCH), 1 % waiting (VERIFY_NOT_FINAL), 1 % duplicate; 80 % pay-ins with amounts 1.00 to
 * 10,000.00; each applied arrival has its receipt.
 */
import { loadConfig } from '@mcb/core/config';
import { createDb } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient } from '@mcb/core/platform';
import { loadavg } from 'node:os';
import pg from 'pg';
import { callbackFilterSchema, searchCallbacks } from '@mcb/console/callbacks';
import { buildApp } from '@mcb/console';
import { progress } from './lib/progress.ts';
import { summarize, type LatencySummary } from './lib/stats.ts';

export interface SearchResult {
  rows: number;
  fillSeconds: number;
  queries: number;
  filters: {
    name: string;
    example: string;
    latencyMs: LatencySummary;
    queryMs?: LatencySummary;
    rowsPerPage: number;
  }[];
  worstP99Ms: number;
  /** The machine's 1-minute load average before and after the queries (2 cores: above 2, others compete for CPU). */
  loadAverage: { before: number; after: number };
}

const TOKEN = 'bench-console-token-0123456789';
const DAY_MS = 86_400_000;
const SPAN_DAYS = 30;

async function fill(databaseUrl: string, rows: number, base: number): Promise<void> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  try {
    const step = `${(SPAN_DAYS * DAY_MS) / rows} milliseconds`;
    // One statement per table, in chunks so progress shows and no single transaction holds the whole fill.
    const chunk = 250_000;
    for (let from = 1; from <= rows; from += chunk) {
      const to = Math.min(rows, from + chunk - 1);
      const params = [from, to, new Date(base).toISOString(), step];
      await pool.query(
        `insert into orders (merchant_no, merchant_order_no, kind, currency, amount, status, platform_order_no, request_hash, created_at)
         select 'M1', 'MO-' || g, case when g % 5 = 0 then 'payout' else 'payin' end, 'PHP', ((g::bigint * 7919) % 999900 + 100) / 100.0,
                case when g % 100 < 96 then (case when g % 5 = 0 then 'succeeded' else 'credited' end) else 'pending' end,
                'P-' || g, md5('MO-' || g), $3::timestamptz + g * $4::interval
           from generate_series($1::int, $2::int) g`,
        params,
      );
      await pool.query(
        `insert into callback_arrivals (job_id, kind, order_no, state, merchant_order_no, amount, received_at, first_seen_at, updated_at, attempts, status, outcome, last_code, last_detail)
         select case when g % 5 = 0 then 'payout-P-' || g || '-4' else 'payin-P-' || g || '-6' end,
                case when g % 5 = 0 then 'payout' else 'payin' end, 'P-' || g, case when g % 5 = 0 then 4 else 6 end, 'MO-' || g,
                case when g % 5 = 0 then null else ((g::bigint * 7919) % 999900 + 100) / 100.0 end,
                date_trunc('milliseconds', $3::timestamptz + g * $4::interval),
                date_trunc('milliseconds', $3::timestamptz + g * $4::interval) + interval '5 milliseconds',
                date_trunc('milliseconds', $3::timestamptz + g * $4::interval) + interval '300 milliseconds', 1,
                (array['applied','failed','review','waiting','duplicate'])[case when g % 100 < 96 then 1 else g % 100 - 94 end],
                case when g % 100 < 96 then (case when g % 5 = 0 then 'succeeded' else 'credited' end) end,
                (array[null,'PLATFORM_HTTP_ERROR','VERIFY_AMOUNT_MISMATCH','VERIFY_NOT_FINAL',null])[case when g % 100 < 96 then 1 else g % 100 - 94 end],
                null
           from generate_series($1::int, $2::int) g`,
        params,
      );
      await pool.query(
        `insert into callback_receipts (order_no, state, kind, merchant_no, merchant_order_no, order_id, fiat_amount, confirmed_amount, source, outcome, job_id, received_at, applied_at)
         select 'P-' || g, case when g % 5 = 0 then 4 else 6 end, case when g % 5 = 0 then 'payout' else 'payin' end, 'M1', 'MO-' || g, g,
                case when g % 5 = 0 then null else ((g::bigint * 7919) % 999900 + 100) / 100.0 end, ((g::bigint * 7919) % 999900 + 100) / 100.0, 'callback',
                case when g % 5 = 0 then 'succeeded' else 'credited' end,
                case when g % 5 = 0 then 'payout-P-' || g || '-4' else 'payin-P-' || g || '-6' end,
                $3::timestamptz + g * $4::interval, $3::timestamptz + g * $4::interval + interval '300 milliseconds'
           from generate_series($1::int, $2::int) g where g % 100 < 96`,
        params,
      );
      progress(
        `search: ${to.toLocaleString('en-US')} of ${rows.toLocaleString('en-US')} orders, arrivals and receipts`,
      );
    }
    await pool.query('analyze orders; analyze callback_arrivals; analyze callback_receipts');
  } finally {
    await pool.end();
  }
}

export async function runSearch(o: { databaseUrl: string; rows: number; queries: number }): Promise<SearchResult> {
  const base = Date.parse('2026-01-01T00:00:00Z');
  const started = performance.now();
  await fill(o.databaseUrl, o.rows, base);
  const fillSeconds = (performance.now() - started) / 1000;
  progress(`search: filled in ${fillSeconds.toFixed(0)} s`);

  const db = createDb(o.databaseUrl, { max: 10, applicationName: 'mcb-bench-search' });
  const config = loadConfig(
    {
      MERCHANT_NO: 'M1',
      PLATFORM_BASE_URL: 'http://127.0.0.1:9',
      PLATFORM_ALLOW_HTTP: 'true',
      CONSOLE_TOKEN: TOKEN,
      DATABASE_URL: o.databaseUrl,
      LOG_LEVEL: 'silent',
    },
    'console',
  );
  const platform = createPlatformClient({ baseUrl: 'http://127.0.0.1:9', merchantNo: 'M1', timeoutMs: 1000 });
  const app = await buildApp({ config, db, platform, logger: createLogger({ name: 'bench-search', level: 'silent' }) });
  await app.ready();
  let seed = 42;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return 1 + (seed % n);
  };
  const at = (ms: number) => new Date(base + ms).toISOString();
  const window = (hours: number) => {
    const start = rand(SPAN_DAYS * 24 - hours) * 3600_000;
    return `from=${at(start)}&to=${at(start + hours * 3600_000)}`;
  };
  const amount = () => {
    const lo = rand(9_900);
    return `amountMin=${lo}.00&amountMax=${lo + 1}.00`;
  };
  const filters: { name: string; query: () => string }[] = [
    { name: 'merchantOrderNo (+ receipts, reviews, timeline)', query: () => `merchantOrderNo=MO-${rand(o.rows)}` },
    { name: 'orderNo (+ receipts, reviews, timeline)', query: () => `orderNo=P-${rand(o.rows)}` },
    { name: 'status=failed', query: () => 'status=failed' },
    { name: 'status=failed, 1-day window', query: () => `status=failed&${window(24)}` },
    { name: 'kind=payout, 1-hour window', query: () => `kind=payout&${window(1)}` },
    { name: 'code=VERIFY_AMOUNT_MISMATCH', query: () => 'code=VERIFY_AMOUNT_MISMATCH' },
    { name: 'amount range (1.00 wide)', query: amount },
    { name: 'amount range, status=applied, 1-day window', query: () => `${amount()}&status=applied&${window(24)}` },
    { name: 'time range (1 hour)', query: () => window(1) },
    { name: 'time range (7 days)', query: () => window(24 * 7) },
  ];
  const result: SearchResult = {
    rows: o.rows,
    fillSeconds,
    queries: o.queries,
    filters: [],
    worstP99Ms: 0,
    loadAverage: { before: loadavg()[0]!, after: 0 },
  };
  /** The search query alone (Postgres round trip, no HTTP, validation or serialization), for the same filter. */
  const query = async (q: string) => {
    const { cursor: _c, limit: _l, ...filter } = Object.fromEntries(new URLSearchParams(q));
    const t = performance.now();
    await searchCallbacks(db.db, callbackFilterSchema.parse(filter));
    return performance.now() - t;
  };
  const ask = async (query: string) => {
    const t = performance.now();
    const res = await app.inject({
      method: 'GET',
      url: `/api/callbacks?${query}`,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const elapsed = performance.now() - t;
    if (res.statusCode !== 200)
      throw new Error(`GET /api/callbacks?${query}: ${res.statusCode} ${res.body.slice(0, 200)}`);
    return { elapsed, body: res.json() as { callbacks: unknown[]; nextCursor: string | null } };
  };
  try {
    for (const f of filters) {
      for (let i = 0; i < 5; i++) await ask(f.query()); // warm the cache of plans and pages
      const samples: number[] = [];
      const querySamples: number[] = [];
      let rowsSeen = 0;
      let example = '';
      for (let i = 0; i < o.queries; i++) {
        const q = f.query();
        example ||= q;
        const { elapsed, body } = await ask(q);
        samples.push(elapsed);
        querySamples.push(await query(q));
        rowsSeen += body.callbacks.length;
      }
      const latencyMs = summarize(samples);
      const queryMs = summarize(querySamples);
      result.filters.push({ name: f.name, example, latencyMs, queryMs, rowsPerPage: rowsSeen / o.queries });
      progress(
        `search: ${f.name}: p50 ${latencyMs.p50.toFixed(1)} ms, p99 ${latencyMs.p99.toFixed(1)} ms (query alone p99 ${queryMs.p99.toFixed(1)} ms), ${(rowsSeen / o.queries).toFixed(0)} rows/page`,
      );
    }
    // The next page of a large result, through the cursor.
    const samples: number[] = [];
    let { body } = await ask('status=applied');
    for (let i = 0; i < o.queries && body.nextCursor; i++) {
      const r = await ask(`status=applied&cursor=${body.nextCursor}`);
      samples.push(r.elapsed);
      body = r.body;
    }
    const latencyMs = summarize(samples);
    result.filters.push({
      name: 'status=applied, following pages by cursor',
      example: 'status=applied&cursor=…',
      latencyMs,
      rowsPerPage: 50,
    });
    progress(`search: cursor pages: p50 ${latencyMs.p50.toFixed(1)} ms, p99 ${latencyMs.p99.toFixed(1)} ms`);
  } finally {
    await app.close();
    await platform.close();
    await db.close();
  }
  result.loadAverage.after = loadavg()[0]!;
  result.worstP99Ms = Math.max(...result.filters.map((f) => f.latencyMs.p99));
  return result;
}
