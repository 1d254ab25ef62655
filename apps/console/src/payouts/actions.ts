/**
 * Payout actions: register a payout, validated against the catalog. The role, the reason and the audit row are
 * checked and written through the orders' registration steps (a payout is an order); the API only calls this.
 */
import { findOrder } from '@mcb/settlement';
import { recordFailure, type Actor } from '../audit/perform.ts';
import {
  authorizeRegistration,
  commitRegistration,
  type Registered,
  type RegistrationDeps,
} from '../orders/actions.ts';
import { payoutView, validateAgainstCatalog, type PayoutCatalog } from './queries.ts';
import type { PayoutBody, PayoutOrderView } from './schemas.ts';

/** What a payout's registration needs: the action layer's, and the catalog a new payout is checked against. */
export interface PayoutDeps extends RegistrationDeps {
  catalog: PayoutCatalog;
}

/**
 * Register a payout (role operator and a reason, or a service): idempotent like a pay-in. A new number is checked
 * against the catalog first (422 PAYOUT_INVALID with every problem, recorded as the action's failure) and keeps the
 * create-payout parameters; a repeat of a registered body answers without consulting the catalog.
 */
export async function registerPayout(
  deps: PayoutDeps,
  actor: Actor,
  body: PayoutBody,
): Promise<Registered<PayoutOrderView>> {
  const { reason, merchant: _named, ...payout } = body;
  const auth = await authorizeRegistration(deps, actor, payout.merchantOrderNo, reason);
  // A retry of a registered payout must not depend on the catalog still being reachable or unchanged.
  let apiParams: Record<string, string> | undefined;
  if (!(await findOrder(deps.db, { merchantNo: deps.merchantNo, merchantOrderNo: payout.merchantOrderNo }))) {
    try {
      ({ apiParams } = await validateAgainstCatalog(deps.catalog, payout));
    } catch (e) {
      await recordFailure(deps, auth, e);
      throw e;
    }
  }
  const { created, order } = await commitRegistration(
    deps,
    auth,
    { kind: 'payout', ...payout },
    // Only a new order is inserted; an existing one keeps its own parameters (and must have the same hash).
    { paymentMethod: payout.paymentMethod, payoutParams: apiParams ?? {} },
  );
  return { created, order: await payoutView(deps.db, order) };
}
