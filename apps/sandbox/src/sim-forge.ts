/** Forged callbacks (`POST /control/forge`): records whose content Get order contradicts. */
import { PayinState, PayoutState } from '@mcb/core/spec';
import { USDT_RATES } from './catalog.ts';
import { multiplyDecimal } from './decimal.ts';
import { PENDING_STATE, type Delivery, type SandboxOrder } from './model.ts';
import {
  checkUrl,
  getOrder,
  invalid,
  makeDelivery,
  merchantOf,
  next,
  now,
  orderNoOf,
  recordFor,
  urlFor,
  type SimState,
} from './sim-state.ts';
import type { ForgeInput } from './simulator.ts';

/** A callback for an order that was never registered: Get order answers "not found" for it. */
function forgeUnknownOrder(s: SimState, input: ForgeInput): Delivery {
  const type = input.type ?? 'payin';
  const merchant = merchantOf(s, input.merchant);
  const n = next(s);
  const ghost: SandboxOrder = {
    orderNo: orderNoOf(s, type, n),
    merchant: merchant.ref,
    merchantNo: merchant.merchantNo,
    merchantOrderNo: `FORGED${s.tag}${n}`,
    type,
    amount: '100.00',
    currency: 'INR',
    quantity: type === 'payin' ? multiplyDecimal('100.00', USDT_RATES.INR ?? '1') : null,
    state: PENDING_STATE,
    createdVia: 'api',
    callbackUrl: input.callbackUrl ?? null,
    createdAt: now(),
    finishedAt: null,
    history: [],
    faults: {},
  };
  const state = type === 'payin' ? PayinState.Released : PayoutState.Succeeded;
  return makeDelivery(s, ghost, 'forged', state, recordFor(ghost, state, new Date()), urlFor(s, ghost));
}

/** A pay-in's release claiming ten times its amount (and quantity). */
function forgeAmount(s: SimState, order: SandboxOrder, url: string): Delivery {
  if (order.type !== 'payin')
    throw invalid('a payout record carries no amount; forge its state instead', { field: 'what' });
  const amount = multiplyDecimal(order.amount, '10');
  const quantity = multiplyDecimal(order.quantity ?? '0', '10');
  const record = recordFor(order, PayinState.Released, new Date(), amount, quantity);
  return makeDelivery(s, order, 'forged', PayinState.Released, record, url);
}

/** A state the order never reached: 6 for a pay-in that has not been released, the other final state for a payout. */
function forgeState(s: SimState, order: SandboxOrder, url: string): Delivery {
  let state: number;
  if (order.type === 'payin') {
    if (order.state === PayinState.Released)
      throw invalid('this pay-in did reach 6; forge its amount instead', { field: 'what' });
    state = PayinState.Released;
  } else {
    state = order.state === PayoutState.Succeeded ? PayoutState.Refused : PayoutState.Succeeded;
  }
  return makeDelivery(s, order, 'forged', state, recordFor(order, state, new Date()), url);
}

/** Send a forged callback of `input.what` and return its delivery. */
export function forge(s: SimState, input: ForgeInput): Delivery {
  if (input.callbackUrl !== undefined) checkUrl(s, input.callbackUrl);
  let d: Delivery;
  if (input.what === 'unknown-order') {
    d = forgeUnknownOrder(s, input);
  } else {
    if (!input.ref) throw invalid('forge needs the order (ref) unless what is unknown-order', { field: 'ref' });
    const order = getOrder(s, input.ref, input.merchant);
    const url = input.callbackUrl ?? urlFor(s, order);
    d = input.what === 'amount' ? forgeAmount(s, order, url) : forgeState(s, order, url);
  }
  s.scheduler.schedule(d);
  return d;
}
