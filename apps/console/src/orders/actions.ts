import type { Database, NewOrder, Order } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { commitAction, type ActionDeps, type Authorized } from '../audit/perform.ts';
import { findOrder } from '@mcb/settlement';
import { insertOrderIfAbsent } from './repo.ts';

/** The 409 every registration gives for a number already registered with another body. */
export function orderConflict(merchantOrderNo: string): AppError {
  return new AppError(
    ErrorCodes.ORDER_CONFLICT,
    `order ${merchantOrderNo} is already registered with a different body; use a new merchantOrderNo`,
    { details: { merchantOrderNo } },
  );
}

/** What a registration did: a new order (201) or the same registration again (200). */
export interface Registered {
  created: boolean;
  order: Order;
}

/** The audit target of a registration. */
export const orderTarget = (merchantOrderNo: string) => `order:${merchantOrderNo}`;

/**
 * Register an order (already authorized for `orders.register`): insert it unless the number exists, in one
 * transaction with the audit row. The same body again is `existing` (200); another body under the number is 409.
 */
export async function registerOrder(
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
