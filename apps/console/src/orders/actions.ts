/**
 * Order actions: register a pay-in (and the registration step a payout shares), replay one failed job of an order.
 * The role, the reason and the audit row are checked and written here (STYLE 18); the API and the pages only call
 * these.
 */
import type { Database, NewOrder, Order } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { normalizeDecimal } from '@mcb/core/money';
import { findOrder } from '@mcb/settlement';
import { authorize, commitAction, type ActionDeps, type Actor, type Authorized } from '../audit/perform.ts';
import { insertOrderIfAbsent, orderView } from './repo.ts';
import { registrationHash } from './request-hash.ts';
import type { OrderView, PayinBody } from './schemas.ts';

/** The 409 every registration gives for a number already registered with another body. */
export function orderConflict(merchantOrderNo: string): AppError {
  return new AppError(
    ErrorCodes.ORDER_CONFLICT,
    `order ${merchantOrderNo} is already registered with a different body; use a new merchantOrderNo`,
    { details: { merchantOrderNo } },
  );
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
  deps: ActionDeps,
  actor: Actor,
  merchantOrderNo: string,
  reason: unknown,
): Promise<Authorized> {
  return authorize(deps, actor, { action: 'orders.register', target: orderTarget(merchantOrderNo), reason });
}

/**
 * The last step of every registration (already authorized): insert the order unless the number exists, in one
 * transaction with the audit row. The same body again is `existing` (200); another body under the number is 409.
 */
export async function commitRegistration(
  deps: ActionDeps,
  auth: Authorized,
  order: NewOrder & { requestHash: string },
): Promise<Registered> {
  return commitAction<Registered>(deps, auth, async (tx: Database) => {
    const created = await insertOrderIfAbsent(tx, order);
    if (created)
      return { result: { created: true, order: created }, outcome: 'created', details: { kind: order.kind } };
    // Registered before, or a concurrent registration of the same number won: the same body is the same order.
    const existing = await findOrder(tx, order.merchantOrderNo);
    if (!existing || existing.requestHash !== order.requestHash) throw orderConflict(order.merchantOrderNo);
    return { result: { created: false, order: existing }, outcome: 'existing', details: { kind: order.kind } };
  });
}

/**
 * Register a pay-in (role operator and a reason, or a service): idempotent, the same body again answers the same
 * order (`created: false`); another body under the number is 409 ORDER_CONFLICT. The reason is not part of what makes
 * two registrations the same.
 */
export async function registerPayin(deps: ActionDeps, actor: Actor, body: PayinBody): Promise<Registered<OrderView>> {
  const { reason, ...payin } = body;
  const auth = await authorizeRegistration(deps, actor, payin.merchantOrderNo, reason);
  const { created, order } = await commitRegistration(deps, auth, {
    merchantOrderNo: payin.merchantOrderNo,
    kind: 'payin',
    currency: payin.currency,
    amount: normalizeDecimal(payin.amount),
    customerId: payin.customerId ?? null,
    requestHash: registrationHash({ kind: 'payin', ...payin }),
  });
  return { created, order: await orderView(deps.db, order) };
}
