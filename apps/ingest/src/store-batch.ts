/**
 * One batch of callbacks stored and proven kept, in named steps: store (add and read back), store variants (a record
 * whose id holds another one), note copies, confirm durable (WAITAOF), confirm replicated (WAIT), confirm primary
 * (the sentinel fence). Nothing is acknowledged before every confirmation has passed. A batch may hold several
 * merchants' callbacks: each merchant's queue is stored in a transaction of its own (on Redis Cluster each queue has
 * its own hash tag, so its own slot and maybe its own node), and each node written to confirms what it holds.
 */
import { createHash } from 'node:crypto';
import { Job, type Queue } from 'bullmq';
import {
  batchDurabilityProblems,
  callBesideKey,
  DURABILITY_CONFIG_GET,
  isCluster,
  type BatchDurabilityCheck,
} from '@mcb/core/redis';
import type { RedisClient } from '@mcb/core/redis';
import type { Settled } from '@mcb/core/batcher';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { callbackJobOptions, jobNote, type CallbackJobInput } from '@mcb/core/queue';
import { addAndReadBack, type IdAdd, type ReadBack, type TransactionGuard } from './add-and-read-back.ts';
import type { PrimaryFence } from './primary-fence.ts';

/** One request's add in a batch: its job and id, its trace context, and the durability check it asked for. */
export interface BatchAdd extends IdAdd {
  check: BatchDurabilityCheck;
  /** The merchant's queue the job goes to. @defaultValue the store's own queue */
  queue?: Queue;
}

/** Options of {@link createStoreBatch}, and of the enqueuer that runs it. */
export interface StoreBatchOptions {
  /** Whole budget of one request's enqueue (waiting for its batch, the add and WAITAOF), in ms. */
  timeoutMs: number;
  /** Replicas that must hold a batch (Redis `WAIT`) before any of it is acknowledged. @defaultValue 0 */
  minReplicas?: number;
  /**
   * Asked, once a batch is durable, whether the node written to is still the primary (through Sentinel: a stale
   * primary's writes are refused, not acknowledged). @defaultValue none
   */
  fence?: PrimaryFence;
  /** Attempts of each job (CALLBACK_JOB_ATTEMPTS). @defaultValue callbackJobOptions.attempts (60) */
  attempts?: number;
  /**
   * Told when a batch was refused because Redis no longer keeps it (its check read AOF off, a laxer fsync or an
   * evicting policy, or WAITAOF answered an error), with one line per problem: the app re-reads durability at once
   * (readiness, early 503s) instead of at its next poll. Must not throw.
   */
  onNotDurable?: (problems: string[]) => void;
}

/** One add's outcome so far. */
type Outcome = { ok: true } | { ok: false; error: Error };

/** What the steps share: the connection, and how a write is proven kept. */
interface Store {
  redis: RedisClient;
  jobOptions: { attempts?: number };
  timeoutMs: number;
  /** Tell the app that Redis does not keep writes now (a listener's failure never changes the outcome). */
  told: (problems: string[]) => void;
}

/** The adds of one queue in a batch, by their positions in the batch. */
interface QueueGroup {
  queue: Queue;
  at: number[];
}

/** A batch Redis does not keep now (its own check said so): not acknowledged, and not a Redis outage either. */
function notDurable(problems: string[]): AppError {
  return new AppError(ErrorCodes.REDIS_NOT_DURABLE, `Redis does not keep this batch now: ${problems.join('; ')}`, {
    details: { problems },
  });
}

/** The record's fields (not when or how it arrived): two callbacks with the same ones are the same callback. */
function recordKey(job: Partial<CallbackJobInput>): string {
  const r = job as Record<string, unknown>;
  return JSON.stringify(
    ['kind', 'orderNo', 'merchantNo', 'merchantOrderNo', 'state', 'payTime', 'quantity', 'fiatAmount'].map(
      (k) => r[k] ?? null,
    ),
  );
}

/**
 * The id of a callback whose contract id is taken by a different record (a forgery sent first, or a genuine record
 * after a forgery): the contract id plus a digest of the record, so it gets its own job and is verified now rather
 * than collapsing onto the other one. Its own retries collapse onto it. The receipt in Postgres stays the guard.
 */
export function variantJobId(jobId: string, job: CallbackJobInput): string {
  return `${jobId}-${createHash('sha256').update(recordKey(job)).digest('hex').slice(0, 16)}`;
}

/** A stored job's data, or undefined when it is not a callback job's JSON. */
function parseJobData(data: string): CallbackJobInput | undefined {
  try {
    return JSON.parse(data) as CallbackJobInput;
  } catch {
    return undefined;
  }
}

/**
 * The batch's steps; each add goes to its own `queue` (a merchant's), or to `queue`. `redis` is the connection every
 * queue uses (WAITAOF and WAIT only cover writes made on their own connection). The result is the Batcher's: one
 * outcome per add, in order; a throw fails the whole batch.
 */
export function createStoreBatch(
  queue: Queue,
  redis: RedisClient,
  options: StoreBatchOptions,
): (adds: readonly BatchAdd[]) => Promise<Settled<void>[]> {
  const told = (problems: string[]) => {
    try {
      options.onNotDurable?.(problems);
    } catch {
      // a listener's failure must not change the batch's outcome
    }
  };
  const store: Store = {
    redis,
    jobOptions: options.attempts === undefined ? {} : { attempts: options.attempts },
    timeoutMs: options.timeoutMs,
    told,
  };
  const configGuard = inTransactionGuard(told);
  const minReplicas = options.minReplicas ?? 0;
  return async function storeBatch(adds) {
    const stillPrimary = options.fence?.begin();
    // The strictest check any request of the batch asked for (they differ only while durability is re-read).
    const guard = adds.some((a) => a.check === 'config-in-transaction') ? configGuard : undefined;
    const groups = byQueue(adds, queue);
    const outcome: Outcome[] = [];
    // Each queue's adds and read-backs travel in one transaction of their own (a transaction spans one slot); the
    // queues' transactions go out together. Each add has its own result.
    await Promise.all(
      groups.map(async (g) => {
        const own = await storeQueue(
          store,
          g.queue,
          g.at.map((i) => adds[i]!),
          guard,
        );
        g.at.forEach((i, k) => (outcome[i] = own[k]!));
      }),
    );
    const stored = groups.filter((g) => g.at.some((i) => outcome[i]!.ok));
    if (stored.length > 0) {
      // WAIT and WAITAOF travel beside a key of a queue written to, to the node that holds it: on a cluster, each
      // queue's node; elsewhere one node holds every queue and one call covers the whole batch.
      const anchors = (pick: (g: QueueGroup) => boolean) => {
        const picked = stored.filter(pick).map((g) => g.queue.keys.meta!);
        return isCluster(redis) ? picked : picked.slice(0, 1);
      };
      const fsync = anchors((g) => g.at.some((i) => adds[i]!.check === 'waitaof' && outcome[i]!.ok));
      await Promise.all(fsync.map((anchor) => confirmDurable(store, anchor)));
      if (minReplicas > 0) await Promise.all(anchors(() => true).map((a) => confirmReplicated(store, a, minReplicas)));
      // Last: the node that holds the batch (and its replicas' WAIT) is still the one the sentinels call primary.
      if (stillPrimary) await stillPrimary();
    }
    return outcome.map((r) => (r.ok ? { ok: true as const, value: undefined } : r));
  };
}

/** The batch's adds grouped by queue (by the queue's key prefix and name), in order of first appearance. */
function byQueue(adds: readonly BatchAdd[], fallback: Queue): QueueGroup[] {
  const groups = new Map<string, QueueGroup>();
  adds.forEach((a, i) => {
    const queue = a.queue ?? fallback;
    const group = groups.get(queue.qualifiedName) ?? { queue, at: [] };
    group.at.push(i);
    groups.set(queue.qualifiedName, group);
  });
  return [...groups.values()];
}

/**
 * One queue's adds: stored with their read-backs in one transaction (one round trip), variants stored again under
 * their own ids, copies noted. Each add runs in the context of the request it came from, so that its span (and the
 * job's trace) is that callback's, whichever request happened to start the batch.
 */
async function storeQueue(
  store: Store,
  queue: Queue,
  adds: readonly BatchAdd[],
  guard: TransactionGuard | undefined,
): Promise<Outcome[]> {
  const { outcome, variants, copies } = sortReadBacks(adds, await addAndReadBack(queue, adds, guard, store.jobOptions));
  if (variants.length > 0) await storeVariants(store, queue, adds, variants, guard, outcome);
  if (copies.length > 0) await noteCopies(queue, adds, copies);
  return outcome;
}

/**
 * On a Redis without WAITAOF the durability check rides in the batch's own transaction: no extra round trip, and
 * it reads the settings at the very moment the adds ran (nothing runs between a transaction's commands).
 */
function inTransactionGuard(told: (problems: string[]) => void): TransactionGuard {
  return {
    command: DURABILITY_CONFIG_GET,
    refuse: (reply) => {
      const problems = batchDurabilityProblems(reply);
      if (problems.length === 0) return undefined;
      told(problems);
      return notDurable(problems);
    },
  };
}

/**
 * Store: what each add's read-back found. Its own record: stored (a copy when it arrived earlier: the same callback
 * again, a platform retry or copy). Another record under the id (a forgery sent first, or the genuine one before a
 * forgery): a variant, which gets a job of its own and is stored only once that job's read-back shows it.
 */
export function sortReadBacks(
  adds: readonly BatchAdd[],
  readBacks: readonly ReadBack[],
): { outcome: Outcome[]; variants: number[]; copies: number[] } {
  const outcome: Outcome[] = [];
  const copies: number[] = [];
  const variants: number[] = [];
  readBacks.forEach((r, i) => {
    if (!r.ok) return void (outcome[i] = r);
    outcome[i] = { ok: true };
    const held = parseJobData(r.data);
    if (!held || recordKey(held) !== recordKey(adds[i]!.job)) variants.push(i);
    else if (held.receivedAt !== adds[i]!.job.receivedAt) copies.push(i);
  });
  return { outcome, variants, copies };
}

/** Store variants: add each again under its variant id; its outcome is that read-back's (written into `outcome`). */
async function storeVariants(
  store: Store,
  queue: Queue,
  adds: readonly BatchAdd[],
  variants: readonly number[],
  guard: TransactionGuard | undefined,
  outcome: Outcome[],
): Promise<void> {
  const again = await addAndReadBack(
    queue,
    variants.map((i) => ({ ...adds[i]!, jobId: variantJobId(adds[i]!.jobId, adds[i]!.job) })),
    guard,
    store.jobOptions,
  );
  variants.forEach((i, k) => {
    const r = again[k]!;
    const held = r.ok ? parseJobData(r.data) : undefined;
    outcome[i] = !r.ok
      ? r
      : held && recordKey(held) === recordKey(adds[i]!.job)
        ? { ok: true }
        : {
            ok: false,
            error: new Error(`job ${variantJobId(adds[i]!.jobId, adds[i]!.job)} holds another record`),
          };
  });
}

/** Note copies on their job, for the console's timeline; best effort: a note never decides an acknowledgement. */
async function noteCopies(queue: Queue, adds: readonly BatchAdd[], copies: readonly number[]): Promise<void> {
  await Promise.allSettled(
    copies.map((i) =>
      Job.addJobLog(
        queue,
        adds[i]!.jobId,
        jobNote({
          event: 'received-again',
          at: adds[i]!.job.receivedAt,
          detail: `the same callback reached ingest again (job ${adds[i]!.jobId} already held it)`,
        }),
        callbackJobOptions.keepLogs,
      ),
    ),
  );
}

/**
 * Confirm durable: one fsync wait covers every write before it on this connection; if it fails, no add is
 * acknowledged. It errors when AOF is off (Redis refuses numlocal without appendonly): that batch is not kept, so
 * say so.
 */
async function confirmDurable(store: Store, anchor: string): Promise<void> {
  let reply: [number, number];
  try {
    reply = (await callBesideKey(store.redis, anchor, 'WAITAOF', '1', '0', String(store.timeoutMs))) as [
      number,
      number,
    ];
  } catch (e) {
    if (e instanceof Error && e.name === 'ReplyError') {
      const problems = [`WAITAOF refused: ${e.message}`];
      store.told(problems);
      throw notDurable(problems);
    }
    throw e;
  }
  if (reply[0] < 1) throw new Error('WAITAOF: the writes were not fsynced to the local AOF in time');
}

/** Confirm replicated: acknowledged means replicated (INGEST_MIN_REPLICAS); WAIT covers every write before it. */
async function confirmReplicated(store: Store, anchor: string, minReplicas: number): Promise<void> {
  const replicas = Number(
    await callBesideKey(store.redis, anchor, 'WAIT', String(minReplicas), String(store.timeoutMs)),
  );
  if (replicas < minReplicas)
    throw new Error(`WAIT: ${replicas} of ${minReplicas} replica(s) acknowledged the writes in time`);
}
