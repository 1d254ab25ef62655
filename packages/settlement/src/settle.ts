import type { Order } from '@mcb/core/db';
import { AppError } from '@mcb/core/errors';
import { inSpan } from '@mcb/core/tracing';
import type { PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import { runAlone, type Settled } from '@mcb/core/batcher';
import { commitEvents } from './commit.ts';
import type { CommitInput } from './commit-types.ts';
import {
  conflictFinding,
  decideAsking,
  decideConfirmed,
  decideEvent,
  type AppliedNote,
  type EventFacts,
  type Verdict,
} from './decide.ts';
import { EventContext } from './event-context.ts';
import { lookUpEvent } from './lookup.ts';
import { recordOrderNote } from './order-notes.ts';
import type { ApplyDeps, ApplyOptions, ApplyOutcome, Confirmation } from './settle-types.ts';

export type { ApplyDeps, ApplyOptions, ApplyOutcome, Confirmation, OpenedReview } from './settle-types.ts';
export {
  createSettlementBatchers,
  type SettlementBatcherOptions,
  type SettlementBatchers,
} from './settlement-batchers.ts';

// The worker's half of "one decision, two modes": read the facts, let decide.ts judge them, act on the verdict.

/**
 * Verify an event with Get order and apply it at most once: the path a callback job, a re-verified review and a
 * reconciliation sweep all take, under the same (OrderNo, state) dedup key, in the order `decideEvent` gives (the
 * spec's "Handling order": receipt, our order, Get order, verify, one transaction).
 *
 * @throws transient errors (Postgres or platform unreachable, 5xx, timeouts) for the caller to retry;
 *   AppError JOB_PAYLOAD_INVALID when the event's state is not one its kind defines.
 */
export async function applyEvent(
  event: CallbackJob,
  deps: ApplyDeps,
  options: ApplyOptions = {},
): Promise<ApplyOutcome> {
  const ctx = new EventContext(event, deps, options);
  const facts = await lookUp(ctx); // what steps 1–2 read: the pair's receipt, our order
  const verdict = await decideAsking(event, facts, () => askPlatform(ctx)); // Get order only when needed
  return act(ctx, verdict);
}

/**
 * Confirm an event: the spec's steps 1–3 (receipt look-up, our order, Get order). Returns Get order's answer for
 * {@link decideAndCommit}, or the outcome when the event is already decided (duplicate, review, deferred).
 *
 * @throws as {@link applyEvent}.
 */
export async function confirmEvent(
  event: CallbackJob,
  deps: ApplyDeps,
  options: ApplyOptions = {},
): Promise<Confirmation> {
  const ctx = new EventContext(event, deps, options);
  const facts = await lookUp(ctx);
  const before = decideEvent(event, facts);
  if (before.verdict !== 'confirm') return act(ctx, before);
  const getOrder = await askPlatform(ctx);
  if (getOrder.ok) return { status: 'confirmed', order: before.ours.order, confirmed: getOrder.value };
  return act(ctx, decideEvent(event, { ...facts, getOrder }));
}

/**
 * Decide and commit: the spec's steps 4–5 for an event, our order and what Get order answered. Verification
 * failures go to review (or wait, for "not final"); a verified event is committed once under the (OrderNo, state)
 * receipt, through the group commit when `deps.batchers` is set.
 */
export async function decideAndCommit(
  event: CallbackJob,
  order: Order,
  confirmed: PlatformOrder,
  deps: ApplyDeps,
  options: ApplyOptions = {},
): Promise<ApplyOutcome> {
  const ctx = new EventContext(event, deps, options);
  return act(ctx, decideConfirmed(event, order, { ok: true, value: confirmed }, ctx.waiting));
}

/**
 * Settle an event whose Get order answer the caller already holds (the reconciliation sweep): steps 1–2 as for a
 * callback, then 4–5 with that answer, without asking the platform again.
 */
export async function applyConfirmed(
  event: CallbackJob,
  confirmed: PlatformOrder,
  deps: ApplyDeps,
  options: ApplyOptions = {},
): Promise<ApplyOutcome> {
  const ctx = new EventContext(event, deps, options);
  const facts = await lookUp(ctx);
  return act(ctx, decideEvent(event, { ...facts, getOrder: { ok: true, value: confirmed } }));
}

/** The facts read before Get order: the look-up (batched when the process shares one), and the in-doubt note. */
async function lookUp(ctx: EventContext): Promise<EventFacts> {
  const { event, deps, options } = ctx;
  const key = {
    merchantNo: event.merchantNo,
    orderNo: event.orderNo,
    state: event.state,
    merchantOrderNo: event.merchantOrderNo,
  };
  const found = deps.batchers ? await deps.batchers.lookups.submit(key) : await lookUpEvent(deps.db, key);
  const wasInDoubt = found.receipt && options.wasInDoubt;
  return {
    ...ctx.waiting,
    found,
    receiptIsOurs: wasInDoubt ? await wasInDoubt(found.receipt!.id) : false,
    reverifying: options.reverifyOf !== undefined,
  };
}

/** Spec step 3: ask the platform; a callback is unsigned, so only Get order's answer counts. Never throws. */
async function askPlatform(ctx: EventContext): Promise<Settled<PlatformOrder>> {
  const { event, deps, options } = ctx;
  const started = performance.now();
  try {
    const confirmed = await inSpan(
      'platform get order',
      { 'mcb.merchant_order_no': event.merchantOrderNo },
      async (span) => {
        const answer = await deps.platform.getOrder(event.merchantOrderNo, { signal: options.signal });
        span?.setAttribute('mcb.confirmed_state', answer.state);
        return answer;
      },
    );
    deps.metrics?.getOrderDuration.observe({ result: 'ok' }, (performance.now() - started) / 1000);
    return { ok: true, value: confirmed };
  } catch (e) {
    const code = e instanceof AppError ? e.code : 'error';
    deps.metrics?.getOrderDuration.observe({ result: code }, (performance.now() - started) / 1000);
    return { ok: false, error: e };
  }
}

/** What the worker does on each verdict: commit, report, review, wait, or fail the attempt. */
async function act(ctx: EventContext, v: Verdict): Promise<ApplyOutcome> {
  const { event, deps, log } = ctx;
  switch (v.verdict) {
    case 'apply':
      return commit(ctx, v);
    case 'applied':
      // An earlier attempt of this very job committed it and never heard back: report its credit now.
      log.info({ receiptId: v.receipt.id }, 'receipt of an earlier attempt whose COMMIT was in doubt: it committed');
      return ctx.reportApplied(v.ours.order, {
        outcome: v.receipt.outcome,
        receiptId: v.receipt.id,
        ledgerEntryId: undefined,
      });
    case 'duplicate':
      if (v.reason === 'receipt-exists') log.info('duplicate event: receipt exists');
      else log.info({ status: v.ours.order.status }, 'duplicate event: order already final with this outcome');
      if (v.reason === 'receipt-exists' && v.note) await noteOnOrder(ctx, v.note);
      return { status: 'duplicate', reason: v.reason };
    case 'review':
      if (v.against) deps.metrics?.suspectedForgeries?.inc({ kind: event.kind, against: v.against });
      return ctx.review(v.finding);
    case 'wait':
      log.info(
        { code: v.finding.code, waitedMs: v.waitedMs, boundMs: v.boundMs },
        `event deferred: ${v.finding.reason}`,
      );
      return { status: 'deferred', code: v.finding.code, reason: v.finding.reason };
    case 'retry':
      throw v.error;
    case 'invalid':
      throw new AppError(v.finding.code, v.finding.reason, { details: v.finding.details });
    case 'confirm':
      throw new Error('settlement: an event was acted on before Get order was asked');
  }
}

/** A duplicate that differs only in what Get order does not confirm: a note naming both jobs, not an alarm. */
async function noteOnOrder(ctx: EventContext, note: AppliedNote): Promise<void> {
  const fields = note.differences.map((d) => d.field);
  ctx.log.info(
    { receiptId: note.receiptId, appliedJobId: note.appliedJobId, fields },
    'duplicate differs from what was applied in a field Get order does not confirm: noted on the order',
  );
  await recordOrderNote(ctx.deps.db, ctx.event, ctx.options.jobId, note);
}

/** Spec step 5: one transaction (receipt, guarded transition, ledger, outbox), shared with concurrent events. */
async function commit(ctx: EventContext, v: Extract<Verdict, { verdict: 'apply' }>): Promise<ApplyOutcome> {
  const { event, deps, log } = ctx;
  const { order, target } = v.ours;
  const input: CommitInput = { event, order, confirmed: v.confirmed, target, jobId: ctx.options.jobId };
  // The span covers this event's wait for its batch's transaction (shared with concurrent jobs: one commit each batch).
  const result = await inSpan('settlement commit', {}, async (span) => {
    const r = deps.batchers
      ? await deps.batchers.commits.submit(input)
      : await runAlone((inputs) => commitEvents(deps.db, inputs), input);
    span?.setAttributes({
      'mcb.commit_result': r.status,
      ...(r.status === 'applied' ? { 'mcb.outcome': r.outcome } : {}),
    });
    return r;
  });
  if (result.status === 'duplicate') {
    log.info({ reason: result.reason }, 'duplicate event (detected in the transaction)');
    return result;
  }
  if (result.status === 'conflict') {
    const current = { status: result.currentStatus, platformOrderNo: result.currentPlatformOrderNo };
    return ctx.review(conflictFinding(event, target, v.confirmed, current));
  }
  return ctx.reportApplied(order, result);
}
