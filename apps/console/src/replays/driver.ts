/**
 * The replay driver: sends the failed jobs of each running replay back to the callbacks queue, in job-id order, a
 * chunk per tick at the replay's rate, and records its progress (cursor, counts) in Postgres after each chunk. The
 * state lives in the replays table and the work in the queue, so a console that restarts, or another console,
 * picks a replay up where its cursor says: a lease (renewed every tick, released on close) keeps two consoles
 * from driving the same replay. A cancelled replay is seen at the next tick (at most a second away) and stops.
 * Replaying never credits twice: a retried job goes through the worker, and the (OrderNo, state) receipt decides.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { callbackArrivals, merchantPauseOf, replayJobs, replays, type Database, type Replay } from '@mcb/core/db';
import { coerceError, firstLineOf } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { retryKeepingStory } from '@mcb/core/queue';
import type { Queue } from 'bullmq';
import { and, eq, inArray, isNull, lt, notInArray, or, sql } from 'drizzle-orm';
import { callbackFilterSchema } from '../callbacks/queries.ts';
import { singleMerchantQueue, type MerchantQueue, type MerchantQueues } from '../callbacks/merchant-queues.ts';
import { DEFAULT_MERCHANT_REF } from '@mcb/core/config';
import { replayCandidates } from './plan.ts';

export interface ReplayDriverOptions {
  db: Database;
  /** Every merchant's callbacks queue: a replay sends its jobs back to its own merchant's (replays.merchant_no). */
  queues?: MerchantQueues;
  /** One merchant's queue (tests): every replay's. Either this or `queues`. */
  queue?: Queue;
  logger: Logger;
  /** How long a console holds a replay without renewing it, in ms. @defaultValue 10000 */
  leaseMs?: number;
  /** How often running replays without a driver are looked for, in ms. @defaultValue 2000 */
  pollMs?: number;
  /** This process's name on the leases. @defaultValue host-pid-random */
  owner?: string;
}

export interface ReplayDriver {
  /** Look for replays to drive now (after a start), instead of at the next poll. */
  wake(): void;
  /** Replays this process drives right now. */
  readonly driving: ReadonlySet<number>;
  /** Stop driving (the current chunk ends first) and release the leases, so another console resumes at once. */
  close(): Promise<void>;
}

/** Jobs per tick and the tick's length: about ten ticks a second, never more than a second between two. */
export function chunking(ratePerSecond: number): { size: number; intervalMs: number } {
  const size = Math.max(1, Math.round(ratePerSecond / 10));
  return { size, intervalMs: (size * 1000) / ratePerSecond };
}

export function startReplayDriver(options: ReplayDriverOptions): ReplayDriver {
  const { db, logger } = options;
  const stop = new AbortController();
  const queues = options.queues ?? singleMerchantQueue(options.queue!, { ref: DEFAULT_MERCHANT_REF, merchantNo: '' });
  const ctx: DriverContext = {
    db,
    queues,
    logger,
    leaseMs: options.leaseMs ?? 10_000,
    owner: options.owner ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
    signal: stop.signal,
  };
  const pollMs = options.pollMs ?? 2_000;
  const driving = new Set<number>();
  const runs = new Set<Promise<void>>();
  let wakeUp: (() => void) | undefined;

  const start = (replay: Replay) => {
    driving.add(replay.id);
    const run = driveReplay(ctx, replay)
      .catch((e: unknown) => logger.error({ err: coerceError(e), replayId: replay.id }, 'replay: driver stopped'))
      .finally(() => {
        driving.delete(replay.id);
        runs.delete(run);
      });
    runs.add(run);
  };

  const loop = async () => {
    while (!stop.signal.aborted) {
      try {
        for (let r = await claim(ctx, driving); r && !stop.signal.aborted; r = await claim(ctx, driving)) start(r);
      } catch (e) {
        logger.warn({ err: coerceError(e) }, 'replay: could not look for replays to drive');
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pollMs);
        wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
        stop.signal.addEventListener('abort', wakeUp, { once: true });
      });
      wakeUp = undefined;
    }
  };
  const looping = loop();

  return {
    wake: () => wakeUp?.(),
    driving,
    async close() {
      stop.abort();
      await looping;
      await Promise.all([...runs]);
      await db
        .update(replays)
        .set({ leaseUntil: null })
        .where(and(eq(replays.leaseOwner, ctx.owner), eq(replays.status, 'running')))
        .catch((e: unknown) =>
          logger.warn({ err: coerceError(e) }, 'replay: could not release leases (they lapse on their own)'),
        );
    },
  };
}

/** What the driver's steps share: its clients, its name on the leases, and the signal that stops it. */
interface DriverContext {
  db: Database;
  queues: MerchantQueues;
  logger: Logger;
  leaseMs: number;
  owner: string;
  signal: AbortSignal;
}

const leaseUntil = (ctx: DriverContext) => sql`now() + ${`${ctx.leaseMs} milliseconds`}::interval`;

/** Take one running replay nobody holds (or this process held before a restart of its loop). */
async function claim(ctx: DriverContext, driving: ReadonlySet<number>): Promise<Replay | undefined> {
  const free = or(isNull(replays.leaseUntil), lt(replays.leaseUntil, sql`now()`), eq(replays.leaseOwner, ctx.owner));
  const busy = [...driving];
  const candidates = and(eq(replays.status, 'running'), free, busy.length ? notInArray(replays.id, busy) : undefined);
  const [row] = await ctx.db
    .update(replays)
    .set({ leaseOwner: ctx.owner, leaseUntil: leaseUntil(ctx) })
    .where(
      eq(replays.id, sql`(select id from ${replays} where ${candidates} order by id limit 1 for update skip locked)`),
    )
    .returning();
  return row;
}

/** Drive one replay a chunk a tick until it is done, cancelled, its lease is lost or the driver stops. */
async function driveReplay(ctx: DriverContext, replay: Replay): Promise<void> {
  const unscoped = callbackFilterSchema.parse(replay.filter);
  // Its merchant's queue and rows only (a job id is unique within one merchant's queue): the filter's `merchant`,
  // which a start requires with several merchants; one started before there were several is the `default`'s.
  const ref = ctx.queues.several ? (unscoped.merchant ?? DEFAULT_MERCHANT_REF) : unscoped.merchant;
  let mq: MerchantQueue;
  try {
    mq = ctx.queues.of(ref, 'filter.merchant');
  } catch (e) {
    // Not driven again at every poll: ended, saying why (the jobs stay failed, for a replay naming a served merchant).
    const why = firstLineOf(coerceError(e)).slice(0, 300);
    ctx.logger.error({ replayId: replay.id, merchant: ref }, 'replay: its merchant is not one this console serves');
    await ctx.db
      .update(replays)
      .set({
        status: 'cancelled',
        endedBy: 'console',
        endReason: why,
        error: why,
        finishedAt: sql`now()`,
        updatedAt: sql`now()`,
        leaseUntil: null,
      })
      .where(and(eq(replays.id, replay.id), eq(replays.status, 'running')));
    return;
  }
  const filter = { ...unscoped, merchantNo: ctx.queues.several ? mq.merchantNo : undefined };
  // Only the set it was started on: a job failing while it runs (one it sent back, or a new one) is not swept in.
  const bound = { asOf: replay.planAsOf, upTo: replay.planUpTo };
  const { size, intervalMs } = chunking(replay.ratePerSecond);
  let cursor = replay.cursor;
  let next = performance.now();
  const log = ctx.logger.child({ replayId: replay.id });
  let waitingForResume = false;
  log.info({ ratePerSecond: replay.ratePerSecond, total: replay.total, cursor }, 'replay: driving');
  while (!ctx.signal.aborted) {
    try {
      // Still ours and still running? A cancel (or a lost lease) ends the loop here, before any further retry.
      if (!(await renewLease(ctx, replay.id))) break;
      // Its merchant paused: nothing is sent back, the lease is kept, and it goes on from its cursor after the resume.
      if (await merchantPauseOf(ctx.db, mq.merchantNo)) {
        if (!waitingForResume) log.info({ merchant: mq.ref }, 'replay: waiting, its merchant is paused');
        waitingForResume = true;
        next = performance.now() + PAUSED_TICK_MS - intervalMs;
      } else {
        if (waitingForResume) log.info({ merchant: mq.ref }, 'replay: its merchant resumed, going on');
        waitingForResume = false;
        const chunk = await replayCandidates(ctx.db, filter, cursor, size, bound);
        if (chunk.length === 0) {
          await finish(ctx.db, replay.id);
          log.info('replay: finished');
          break;
        }
        cursor = await sendBack(ctx, mq.queue, replay.id, chunk);
      }
    } catch (e) {
      // Redis or Postgres away: the cursor did not move; try the same chunk again after a pause.
      log.warn({ err: coerceError(e) }, 'replay: chunk failed, will retry it');
      await ctx.db
        .update(replays)
        .set({ error: firstLineOf(coerceError(e)).slice(0, 300) })
        .where(eq(replays.id, replay.id))
        .catch(() => 0);
      next = performance.now() + 1000;
    }
    next += intervalMs;
    const wait = next - performance.now();
    if (wait > 0) await delay(wait, undefined, { signal: ctx.signal }).catch(() => undefined);
    else next = performance.now(); // fell behind (a slow chunk): no burst to catch up
  }
}

/** How often a replay whose merchant is paused looks again, in ms (well within its lease). */
const PAUSED_TICK_MS = 500;

/** Renew this process's lease on a running replay; false once it is cancelled, finished or held by another. */
async function renewLease(ctx: DriverContext, id: number): Promise<boolean> {
  const [held] = await ctx.db
    .update(replays)
    .set({ leaseUntil: leaseUntil(ctx), updatedAt: sql`now()` })
    .where(and(eq(replays.id, id), eq(replays.status, 'running'), eq(replays.leaseOwner, ctx.owner)))
    .returning({ id: replays.id });
  return held !== undefined;
}

async function finish(db: Database, id: number): Promise<void> {
  await db
    .update(replays)
    .set({ status: 'finished', finishedAt: sql`now()`, updatedAt: sql`now()`, leaseUntil: null })
    .where(and(eq(replays.id, id), eq(replays.status, 'running')));
}

/** Send one chunk back to the queue and record it (which jobs, their arrivals, the counts); the new cursor. */
async function sendBack(
  ctx: DriverContext,
  queue: Queue,
  replayId: number,
  chunk: readonly { jobId: string; merchantNo: string; updatedAt: Date }[],
): Promise<string> {
  const { db } = ctx;
  const results = await Promise.all(chunk.map((c) => retryFailed(queue, c.jobId)));
  const replayed = results.filter(Boolean).length;
  const cursor = chunk.at(-1)!.jobId;
  // The search shows them as queued again at once. updated_at stays the worker's (its failure report's), so the
  // worker's next report, stamped later by its own clock, always replaces this one.
  const sent = chunk.filter((_, i) => results[i]);
  if (sent.length > 0) {
    // Which jobs this replay sent back: its page says what became of each (credited, failed again, ...).
    await db
      .insert(replayJobs)
      .values(sent.map(({ jobId, merchantNo }) => ({ replayId, jobId, merchantNo })))
      .onConflictDoNothing();
    await markSentBack(db, replayId, sent);
  }
  await db
    .update(replays)
    .set({
      replayed: sql`${replays.replayed} + ${replayed}`,
      skipped: sql`${replays.skipped} + ${chunk.length - replayed}`,
      cursor,
      error: null,
      updatedAt: sql`now()`,
    })
    .where(eq(replays.id, replayId));
  return cursor;
}

/**
 * Show the jobs sent back as retrying, each only while its row is still the one read: a job that ran and failed for
 * good again meanwhile has a newer `failed` row (the worker's), which stays, so replay by filter finds it again.
 */
async function markSentBack(
  db: Database,
  replayId: number,
  rows: readonly { jobId: string; merchantNo: string; updatedAt: Date }[],
) {
  const t = callbackArrivals;
  const read = sql.join(
    rows.map(
      (r) =>
        sql`(${t.jobId} = ${r.jobId} and ${t.merchantNo} = ${r.merchantNo} and date_trunc('milliseconds', ${t.updatedAt}) = ${r.updatedAt.toISOString()}::timestamptz)`,
    ),
    sql` or `,
  );
  await db
    .update(t)
    .set({ status: 'retrying', lastDetail: `sent back to the queue by replay ${replayId}` })
    .where(
      and(
        eq(t.status, 'failed'),
        inArray(
          t.jobId,
          rows.map((r) => r.jobId),
        ),
        sql`(${read})`,
      ),
    );
}

/**
 * Send one failed job back to the queue with a fresh retry budget, its failure noted on its log; false when it is
 * gone or no longer failed (someone retried it).
 */
async function retryFailed(queue: Queue, jobId: string): Promise<boolean> {
  const job = await queue.getJob(jobId);
  if (!job) return false;
  try {
    await retryKeepingStory(job, 'failed');
    return true;
  } catch (e) {
    // BullMQ refuses a job that is not in the failed set (already retried, completed): nothing to replay.
    if (/not in the failed state|is not in the|Missing key/i.test(coerceError(e).message)) return false;
    throw e;
  }
}
