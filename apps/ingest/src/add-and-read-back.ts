import { Job, SpanKind, type Queue } from 'bullmq';
import type { ChainableCommander } from 'ioredis';
import { callbackJobOptions, type CallbackJobInput } from '@mcb/core/queue';
import { withContext, type Context } from '@mcb/core/tracing';

/** One job to add under an id of ours. */
export interface IdAdd {
  job: CallbackJobInput;
  jobId: string;
  /** The request's trace context (tracing on only). */
  context: Context | undefined;
}

/**
 * A command run in the same transaction as the adds, whose reply decides whether any of them counts as stored (the
 * batch's durability check on a Redis without WAITAOF): `refuse` returns the error every add then fails with, or
 * undefined. It sees the server exactly as the adds did: nothing runs between the commands of one `MULTI`/`EXEC`.
 */
export interface TransactionGuard {
  command: readonly string[];
  refuse(reply: unknown): Error | undefined;
}

/** What one add's id held once the add had run: the stored job's `data`, or why the step failed. */
export type ReadBack = { ok: true; data: string } | { ok: false; error: Error };

/**
 * Add each job under its id (with `jobOptions.attempts` when given: CALLBACK_JOB_ATTEMPTS) and read back what the
 * id holds, every pair in ONE `MULTI`/`EXEC` on the queue's connection. Nothing can run between an add and its
 * read-back: not the worker releasing a reviewed forgery's id, not a removal from the dashboard. So the read-back
 * says exactly what is stored under the id once the add has run: this record (added now, or an identical copy
 * before), or another record that held the id first (BullMQ's add is a no-op on a taken id). The caller decides
 * which; nothing here counts as stored without its read-back.
 *
 * On Redis Cluster the transaction is legal because every key of the queue shares the prefix's hash tag. A Redis
 * that refuses to queue a command (OOM) aborts the whole transaction: every add of the batch fails, none is told
 * it is stored. With a `guard`, its command runs in the same transaction, and when it refuses, every add fails
 * with its error (the adds did run: the platform's retry collapses onto the same ids).
 */
export async function addAndReadBack(
  queue: Queue,
  adds: readonly IdAdd[],
  guard?: TransactionGuard,
  jobOptions: { attempts?: number } = {},
): Promise<ReadBack[]> {
  if (adds.length === 0) return [];
  const client = await queue.getBackend().client;
  const multi = client.multi();
  // BullMQ types its transaction backend-neutrally; on the Redis backend it is ioredis's, with length and hget.
  const tx = multi as unknown as ChainableCommander;
  // Each add is queued synchronously inside its own (BullMQ producer) span; the spans end once EXEC answers.
  let settle!: (results: Array<[Error | null, unknown]> | Error) => void;
  const executed = new Promise<Array<[Error | null, unknown]> | Error>((resolve) => (settle = resolve));
  // Where each add's two replies sit in EXEC's answer (unset: its commands were not queued before EXEC).
  const positions: Array<{ add: number; readBack: number } | Error | undefined> = adds.map(() => undefined);
  let queued = 0;
  const traced = adds.map((a, i) =>
    withContext(a.context, () =>
      queue.trace(SpanKind.PRODUCER, 'add', `${queue.name}.${a.job.kind}`, async (span, metadata) => {
        const opts = {
          ...queue.jobsOpts,
          ...callbackJobOptions,
          ...jobOptions,
          jobId: a.jobId,
          ...(metadata ? { telemetry: { metadata } } : {}),
        };
        const before = tx.length;
        // BullMQ's own add script, queued on our transaction (addJob enqueues before its first await).
        void new Job(queue, a.job.kind, a.job, opts, a.jobId).addJob(multi).catch(() => {});
        if (tx.length !== before + 1) {
          positions[i] = new Error(`job ${a.jobId} could not be queued for adding`);
        } else {
          tx.hget(`${queue.qualifiedName}:${a.jobId}`, 'data');
          positions[i] = { add: queued, readBack: queued + 1 };
          queued += 2;
        }
        span?.setAttributes({ 'bullmq.job.name': a.job.kind, 'bullmq.job.id': a.jobId });
        const results = await executed;
        if (results instanceof Error) throw results;
      }),
    ),
  );
  // The guard goes last, after every add (its reply sits at `queued`); without an add there is nothing to guard.
  const guarded = guard !== undefined && queued > 0;
  if (guarded) tx.call(guard.command[0]!, ...guard.command.slice(1));
  let results: Array<[Error | null, unknown]> | Error;
  try {
    const replies = queued > 0 ? await tx.exec() : [];
    results = replies ?? new Error('MULTI/EXEC was aborted');
  } catch (e) {
    results = e instanceof Error ? e : new Error(String(e));
  }
  if (guarded && !(results instanceof Error)) {
    const [guardError, reply] = results[queued] ?? [new Error(`no reply to ${guard.command.slice(0, 2).join(' ')}`)];
    // A guard that cannot be read refuses too (fail closed): the adds ran, but none is told it is stored.
    const refusal = guardError ?? guard.refuse(reply);
    if (refusal) results = refusal;
  }
  settle(results);
  await Promise.allSettled(traced);
  return positions.map((p, i): ReadBack => {
    if (p === undefined) return { ok: false, error: new Error(`job ${adds[i]!.jobId} was not queued before EXEC`) };
    if (p instanceof Error) return { ok: false, error: p };
    if (results instanceof Error) return { ok: false, error: results };
    const [addError] = results[p.add] ?? [new Error('no reply to the add')];
    if (addError) return { ok: false, error: addError };
    const [readError, data] = results[p.readBack] ?? [new Error('no reply to the read-back')];
    if (readError) return { ok: false, error: readError };
    // In one transaction an add that succeeded leaves a job under its id; anything else is not "stored".
    if (typeof data !== 'string')
      return { ok: false, error: new Error(`job ${adds[i]!.jobId} holds no data right after its add`) };
    return { ok: true, data };
  });
}
