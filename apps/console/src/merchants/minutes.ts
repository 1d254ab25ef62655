/**
 * Each merchant's callbacks per minute (merchant_minutes, migration 0016): the 24-hour picture of the merchants page,
 * rolled up from callback_arrivals so that it survives restarts and is read as 1,440 rows, not the arrivals.
 *
 * Per merchant and minute: `received` (arrivals by `received_at`: when ingest accepted the callback), `credited`
 * (arrivals `applied`: credited pay-ins, succeeded or refused payouts, by the time the worker reported it applied,
 * `updated_at`), `failed` (failed for good, by the time of that report) and `credit_p99_ms` (p99 of `received_at` →
 * applied over the minute's credits). A credit is counted when its callback arrived at most 24 hours before it.
 *
 * The roll-up fills every closed minute of the last 24 hours not rolled up yet (with zeros when nothing happened)
 * and rolls the last {@link RESETTLE_MINUTES} again: an arrival's row is written by the worker when it takes the job
 * (seconds later, or after a pause), and a job fails for good after its retries. It is idempotent (ON CONFLICT DO
 * UPDATE with the same figures), and two consoles do not run it at once (a transaction-level advisory lock: the
 * second skips).
 */
import type { Database } from '@mcb/core/db';
import { sql } from 'drizzle-orm';

/** Closed minutes rolled up again on every run, for arrivals whose rows came late. */
export const RESETTLE_MINUTES = 5;
/** How far back the picture (and the first roll-up) goes. */
export const HISTORY_MINUTES = 24 * 60;
/** The advisory lock of the roll-up (one console at a time). */
const ROLLUP_LOCK = 51_000_051;

/** One minute of one merchant's picture. */
export interface MinuteFigures {
  /** The minute's start, ISO. */
  minute: string;
  received: number;
  credited: number;
  failed: number;
  /** Callback-to-credit p99 of the minute's credits, in ms; null with none. */
  creditP99Ms: number | null;
}

const floorMinute = (at: Date) => new Date(Math.floor(at.getTime() / 60_000) * 60_000);

/**
 * Roll up the closed minutes of `merchantNos` up to `now`'s minute (not included). Returns false when another
 * console holds the roll-up (it writes the same rows).
 */
export async function rollupMinutes(db: Database, merchantNos: readonly string[], now = new Date()): Promise<boolean> {
  const closed = floorMinute(now).toISOString();
  return db.transaction(async (tx) => {
    const lock = await tx.execute<{ ok: boolean }>(sql`select pg_try_advisory_xact_lock(${ROLLUP_LOCK}) as ok`);
    if (!lock.rows[0]?.ok) return false;
    await tx.execute(sql`
      with m as (
        select n.no as merchant_no,
               greatest(
                 coalesce((select max(mm.minute) from merchant_minutes mm where mm.merchant_no = n.no)
                            - make_interval(mins => ${RESETTLE_MINUTES}),
                          ${closed}::timestamptz - make_interval(mins => ${HISTORY_MINUTES})),
                 ${closed}::timestamptz - make_interval(mins => ${HISTORY_MINUTES})) as f
          from jsonb_array_elements_text(${JSON.stringify(merchantNos)}::jsonb) as n(no)
      ),
      mins as (
        select m.merchant_no, g as minute
          from m, generate_series(m.f, ${closed}::timestamptz - interval '1 minute', interval '1 minute') g
      ),
      ${figuresCte(sql`${closed}::timestamptz`)}
      insert into merchant_minutes (merchant_no, minute, received, credited, failed, credit_p99_ms)
      select mins.merchant_no, mins.minute, coalesce(recv.n, 0), coalesce(ended.credited, 0), coalesce(ended.failed, 0),
             ended.p99
        from mins
        left join recv using (merchant_no, minute)
        left join ended using (merchant_no, minute)
       order by 1, 2
      on conflict (merchant_no, minute) do update
        set received = excluded.received, credited = excluded.credited, failed = excluded.failed,
            credit_p99_ms = excluded.credit_p99_ms
        where (merchant_minutes.received, merchant_minutes.credited, merchant_minutes.failed,
               merchant_minutes.credit_p99_ms)
              is distinct from (excluded.received, excluded.credited, excluded.failed, excluded.credit_p99_ms)`);
    return true;
  });
}

/**
 * The figures per minute of the arrivals of `m` (a CTE with `merchant_no` and the first minute `f`) up to `to`:
 * `recv` (received per minute) and `ended` (credited, failed and the credits' p99 per minute). Each is a look-up per
 * merchant (LATERAL), so that it reads that merchant's index over the minutes asked: `received_at` for `recv`,
 * `updated_at` for `ended` (callback_arrivals_merchant_updated_idx), not the day of arrivals a credit may come from.
 */
function figuresCte(to: ReturnType<typeof sql>) {
  return sql`
      recv as (
        select m.merchant_no, r.minute, r.n
          from m cross join lateral (
            select date_trunc('minute', a.received_at) as minute, count(*)::int as n
              from callback_arrivals a
             where a.merchant_no = m.merchant_no and a.received_at >= m.f and a.received_at < ${to}
             group by 1) r
      ),
      ended as (
        select m.merchant_no, e.minute, e.credited, e.failed, e.p99
          from m cross join lateral (
            select date_trunc('minute', a.updated_at) as minute,
                   count(*) filter (where a.status = 'applied')::int as credited,
                   count(*) filter (where a.status = 'failed')::int as failed,
                   round(percentile_disc(0.99) within group (
                     order by extract(epoch from a.updated_at - a.received_at) * 1000)
                     filter (where a.status = 'applied'))::int as p99
              from callback_arrivals a
             where a.merchant_no = m.merchant_no
               and a.updated_at >= m.f and a.updated_at < ${to}
               and a.received_at >= m.f - interval '24 hours' and a.received_at < ${to}
               and a.status in ('applied', 'failed')
             group by 1) e
      )`;
}

/** True when merchant `merchantNo`'s last closed minute before `now` is not rolled up yet. */
export async function rollupBehind(db: Database, merchantNo: string, now = new Date()): Promise<boolean> {
  const last = new Date(floorMinute(now).getTime() - 60_000).toISOString();
  const r = await db.execute<{ n: number }>(
    sql`select count(*)::int as n from merchant_minutes where merchant_no = ${merchantNo} and minute = ${last}::timestamptz`,
  );
  return (r.rows[0]?.n ?? 0) === 0;
}

/**
 * Merchant `merchantNo`'s picture over the last `minutes` closed minutes before `now`, then the open minute (live, from
 * the arrivals): one entry per minute, in order; a minute with no row (not rolled up, or before the first roll-up)
 * reads as zeros.
 */
export async function readMinutes(
  db: Database,
  merchantNo: string,
  now = new Date(),
  minutes = HISTORY_MINUTES,
): Promise<MinuteFigures[]> {
  const open = floorMinute(now);
  const from = new Date(open.getTime() - minutes * 60_000);
  const [rows, live] = await Promise.all([
    db.execute<{ minute: Date | string; received: number; credited: number; failed: number; p99: number | null }>(sql`
      select minute, received, credited, failed, credit_p99_ms as p99 from merchant_minutes
       where merchant_no = ${merchantNo} and minute >= ${from.toISOString()}::timestamptz
         and minute < ${open.toISOString()}::timestamptz
       order by minute`),
    openMinute(db, merchantNo, open, now),
  ]);
  const byMinute = new Map(rows.rows.map((r) => [new Date(r.minute).getTime(), r]));
  const out: MinuteFigures[] = [];
  for (let t = from.getTime(); t < open.getTime(); t += 60_000) {
    const r = byMinute.get(t);
    out.push({
      minute: new Date(t).toISOString(),
      received: r?.received ?? 0,
      credited: r?.credited ?? 0,
      failed: r?.failed ?? 0,
      creditP99Ms: r?.p99 ?? null,
    });
  }
  out.push(live);
  return out;
}

/** The open minute, computed live from the arrivals (never stored: it is not over). */
async function openMinute(db: Database, merchantNo: string, open: Date, now: Date): Promise<MinuteFigures> {
  const f = open.toISOString();
  const to = new Date(Math.max(now.getTime(), open.getTime()) + 1).toISOString();
  const r = await db.execute<{ received: number; credited: number; failed: number; p99: number | null }>(sql`
    with m as (select ${merchantNo}::text as merchant_no, ${f}::timestamptz as f),
    ${figuresCte(sql`${to}::timestamptz`)}
    select coalesce((select sum(n) from recv), 0)::int as received,
           coalesce((select sum(credited) from ended), 0)::int as credited,
           coalesce((select sum(failed) from ended), 0)::int as failed,
           (select max(p99) from ended) as p99`);
  const row = r.rows[0];
  return {
    minute: f,
    received: row?.received ?? 0,
    credited: row?.credited ?? 0,
    failed: row?.failed ?? 0,
    creditP99Ms: row?.p99 ?? null,
  };
}
