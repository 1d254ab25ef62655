import { validatePayout, type CatalogCache, type CatalogView } from '@mcb/core/catalog';
import type { Database, Order } from '@mcb/core/db';
import { AppError, ErrorCodes, isAppError } from '@mcb/core/errors';
import { orderView } from '../orders/repo.ts';
import type { PayoutBody, PayoutOrderView, ValidateResponse } from './schemas.ts';

/** The catalog a payout is checked against: its `get` (the route reads the view's age into headers on the way). */
export type PayoutCatalog = Pick<CatalogCache, 'get'>;

/** A payout that satisfies the catalog: its create-payout parameters, and the catalog it was checked against. */
export interface Validated {
  apiParams: Record<string, string>;
  view: CatalogView;
}

/** Validate against the catalog for the payout's currency; 422 PAYOUT_INVALID with every problem, or the apiParams. */
export async function validateAgainstCatalog(
  catalog: PayoutCatalog,
  body: Omit<PayoutBody, 'merchantOrderNo' | 'reason' | 'merchant'>,
): Promise<Validated> {
  const view = await catalog.get({ currency: body.currency }).catch((e: unknown) => {
    // For a payout, a currency not enabled is one more validation problem of the body, in the same shape.
    if (!isAppError(e) || e.code !== ErrorCodes.CURRENCY_NOT_ENABLED) throw e;
    throw new AppError(ErrorCodes.PAYOUT_INVALID, 'the payout does not satisfy the catalog (1 problem)', {
      cause: e,
      details: { errors: [{ field: 'currency', message: e.message }], ...e.details },
    });
  });
  const result = validatePayout(view.catalog, body);
  if (!result.ok) {
    throw new AppError(
      ErrorCodes.PAYOUT_INVALID,
      `the payout does not satisfy the catalog (${result.errors.length} problem${result.errors.length === 1 ? '' : 's'})`,
      {
        details: { errors: result.errors },
      },
    );
  }
  return { apiParams: result.apiParams, view };
}

/** `POST /api/payouts/validate`: the payout's apiParams and the age of the catalog it satisfies; it registers nothing. */
export async function payoutValidation(
  catalog: PayoutCatalog,
  body: Omit<PayoutBody, 'merchantOrderNo' | 'reason'>,
): Promise<ValidateResponse> {
  const { merchant: _named, ...payout } = body;
  const { apiParams, view } = await validateAgainstCatalog(catalog, payout);
  return {
    ok: true as const,
    apiParams,
    catalog: { fetchedAt: view.fetchedAt.toISOString(), ageSeconds: view.ageSeconds, stale: view.stale },
  };
}

/** A registered payout as the API shows it: the order view, plus its method and create-payout parameters. */
export async function payoutView(db: Database, order: Order): Promise<PayoutOrderView> {
  return {
    ...(await orderView(db, order)),
    paymentMethod: order.paymentMethod ?? 0,
    apiParams: order.payoutParams ?? {},
  };
}
