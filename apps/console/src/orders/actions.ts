/**
 * Order actions: register a pay-in (and the registration steps a payout shares), replay one failed job of an order.
 * The role, the reason and the audit row are checked and written here (STYLE 18); the API and the pages only call
 * these.
 */
import type { Database, NewOrder, Order } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { normalizeDecimal } from '@mcb/core/money';
import { retryKeepingStory } from '@mcb/core/queue';
import { findOrder } from '@mcb/settlement';
import type { Queue } from 'bullmq';
import {
  authorize,
  commitAction,
  commitExternalAction,
  type ActionDeps,
  type Actor,
  type Authorized,
} from '../audit/perform.ts';
import { insertOrderIfAbsent, orderView } from './repo.ts';
import { registrationHash, type RegistrationRequest } from './request-hash.ts';
import type { OrderView, PayinBody } from './schemas.ts';

/** The 409 every registration gives for a number already registered with another body. */
export function orderConflict(merchantOrderNo: string): AppError {
  return new AppError(
    ErrorCodes.ORDER_CONFLICT,
    `order ${merchantOrderNo} is already registered with a different body; use a new merchantOrderNo`,
    { details: { merchantOrderNo } },
  );
}

/** What a registration needs: the action layer's, and the merchant whose order it registers. */
export interface RegistrationDeps extends ActionDeps {
  /** The merchant number the order is registered for (written on the row; the key is per merchant). */
  merchantNo: string;
  /** The merchant's ref, recorded in the audit details when the console serves several merchants. @defaultValue none */
  namedMerchant?: string;
}

/** What a registration did: a new order (201) or the same registration again (200); the order, or its view. */
export interface Registered<O = Order> {
  created: boolean;
  order: O;
}

/** The audit target of a registration. */
export const orderTarget = (merchantOrderNo: string) => `order:${merchantOrderNo}`;

/**
 * The first step of every registration (a pay-in's, a payout's): `orders.register` for `merchantOrderNo`, which needs
 * the role operator and a reason, or the role service (no reason). A refusal is written to the audit trail.
 */
export async function authorizeRegistration(
  deps: RegistrationDeps,
  actor: Actor,
  merchantOrderNo: string,
  reason: unknown,
): Promise<Authorized> {
  return authorize(deps, actor, {
    action: 'orders.register',
    target: orderTarget(merchantOrderNo),
    reason,
    merchant: deps.merchantNo,
  });
}

/**
 * The last step of every registration (already authorized): insert the order the request describes, with its
 * request hash (and `columns` of its kind: a payout's method and parameters), unless the number exists, in one
 * transaction with the audit row. The same body again is `existing` (200); another body under the number is 409.
 */
export async function commitRegistration(
  deps: RegistrationDeps,
  auth: Authorized,
  request: RegistrationRequest,
  columns: Pick<NewOrder, 'paymentMethod' | 'payoutParams'> = {},
): Promise<Registered> {
  const order = {
    merchantNo: deps.merchantNo,
    merchantOrderNo: request.merchantOrderNo,
    kind: request.kind,
    currency: request.currency,
    amount: normalizeDecimal(request.amount),
    customerId: request.customerId ?? null,
    ...columns,
    requestHash: registrationHash(request),
  } satisfies NewOrder;
  return commitAction<Registered>(deps, auth, async (tx: Database) => {
    const created = await insertOrderIfAbsent(tx, order);
    // With several merchants the audit row says whose order it is (its number; the ref is in the route's answer).
    const details = { kind: order.kind, ...(deps.namedMerchant ? { merchant: deps.namedMerchant } : {}) };
    if (created) return { result: { created: true, order: created }, outcome: 'created', details };
    // Registered before, or a concurrent registration of the same number won: the same body is the same order.
    const existing = await findOrder(tx, order);
    if (!existing || existing.requestHash !== order.requestHash) throw orderConflict(order.merchantOrderNo);
    return { result: { created: false, order: existing }, outcome: 'existing', details };
  });
}

/**
 * Register a pay-in (role operator and a reason, or a service): idempotent, the same body again answers the same
 * order (`created: false`); another body under the number is 409 ORDER_CONFLICT. The reason is not part of what makes
 * two registrations the same.
 */
export async function registerPayin(
  deps: RegistrationDeps,
  actor: Actor,
  body: PayinBody,
): Promise<Registered<OrderView>> {
  const { reason, merchant: _named, ...payin } = body;
  const auth = await authorizeRegistration(deps, actor, payin.merchantOrderNo, reason);
  const { created, order } = await commitRegistration(deps, auth, { kind: 'payin', ...payin });
  return { created, order: await orderView(deps.db, order) };
}

/** What "Replay this job" needs: the action layer's, and the callbacks queue of the order's merchant. */
export interface ReplayJobDeps extends ActionDeps {
  queue: Queue;
  /** The number of the order's merchant (null: no such order), which the action layer checks scope against. */
  merchantNo: string | null;
}

/** What the replay did: the job is waiting again, with a fresh budget. */
export interface ReplayedJob {
  jobId: string;
  attemptsBefore: number;
}

/**
 * "Replay this job" on the order page (and POST /api/orders/{merchantOrderNo}/jobs/{jobId}/replay): one failed job of
 * `merchantOrderNo` sent back to the queue with a fresh retry budget, like Retry on a Hookdeck or Svix event; 404 when
 * the job is not the order's, 409 JOB_NOT_FAILED when not failed. Role operator, a reason; audited as `queue.retry` on
 * `job:callbacks/{jobId}` (the dashboard's retry, the same effect) with `via: order-page`, its intent row written
 * before the job moves (docs/console.md, "Actions that commit on their own"). Safe to repeat: applyEvent's receipt
 * under (OrderNo, state) keeps a replayed job from crediting twice.
 */
export async function replayJob(
  deps: ReplayJobDeps,
  actor: Actor,
  merchantOrderNo: string,
  jobId: string,
  reason: unknown,
): Promise<ReplayedJob> {
  const auth = await authorize(deps, actor, {
    action: 'queue.retry',
    target: `job:${deps.queue.name}/${jobId}`,
    reason,
    merchant: deps.merchantNo,
  });
  // A job that is not the order's is a wrong request, refused before anything is recorded against that job.
  const job = await deps.queue.getJob(jobId);
  if (!job || (job.data as { merchantOrderNo?: unknown }).merchantOrderNo !== merchantOrderNo) {
    throw new AppError(ErrorCodes.NOT_FOUND, `order ${merchantOrderNo} has no job ${jobId}`, {
      details: { merchantOrderNo, jobId },
    });
  }
  return commitExternalAction(deps, auth, async () => {
    const state = await job.getState();
    if (state !== 'failed')
      throw new AppError(ErrorCodes.JOB_NOT_FAILED, `job ${jobId} is ${state}, not failed: nothing to replay`, {
        details: { jobId, state },
      });
    const attemptsBefore = job.attemptsMade;
    try {
      await retryKeepingStory(job, 'failed');
    } catch (e) {
      // Someone (a replay, the dashboard) sent it back between our look and the retry.
      if (/not in the failed state|is not in the|Missing key/i.test(e instanceof Error ? e.message : '')) {
        throw new AppError(ErrorCodes.JOB_NOT_FAILED, `job ${jobId} is no longer failed: nothing to replay`, {
          details: { jobId },
        });
      }
      throw e;
    }
    return {
      result: { jobId, attemptsBefore },
      outcome: 'replayed',
      details: { via: 'order-page', merchantOrderNo, attemptsBefore },
    };
  });
}
