/**
 * Orders on the simulated platform: creating one (as the merchant's API call or the console would) and moving it to
 * a final state, which sends its callback (and, with the `stale` fault, a stale one after it).
 */
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { CALLBACK_SENT_STATES, FINAL_STATES, PayinState, PayoutState } from '@mcb/core/spec';
import { findCurrency, USDT_RATES } from './catalog.ts';
import { fitsDecimals, multiplyDecimal } from './decimal.ts';
import { PENDING_STATE, type Delivery, type OrderType, type SandboxOrder } from './model.ts';
import {
  checkFaults,
  checkUrl,
  getOrder,
  indexOrder,
  invalid,
  makeDelivery,
  merchantOf,
  next,
  now,
  orderNoOf,
  orderOfMerchant,
  recordFor,
  urlFor,
  type SimState,
} from './sim-state.ts';
import type { CreateOrderInput } from './simulator.ts';

/** The merchant and currency of `input`, checked with the amount, quantity, callback URL and kind of creation. */
function checkOrderInput(s: SimState, type: OrderType, input: CreateOrderInput) {
  const merchant = merchantOf(s, input.merchant);
  const currency = findCurrency(input.currency);
  if (!currency)
    throw invalid(`currency ${JSON.stringify(input.currency)} is not enabled in the sandbox`, { field: 'currency' });
  if (!fitsDecimals(input.amount, currency.decimals)) {
    throw invalid(
      `amount must be a positive decimal with at most ${currency.decimals} decimals for ${currency.currency}`,
      {
        field: 'amount',
      },
    );
  }
  if (input.quantity !== undefined && (type !== 'payin' || !fitsDecimals(input.quantity, 18))) {
    throw invalid('quantity is a positive decimal, for pay-ins only', { field: 'quantity' });
  }
  if (input.callbackUrl !== undefined) checkUrl(s, input.callbackUrl);
  const createdVia = input.createdVia ?? 'api';
  if (type === 'payin' && createdVia !== 'api')
    throw invalid('pay-ins are created through the API only', { field: 'createdVia' });
  return { merchant, currency, createdVia };
}

/** A merchant order number the merchant has not used so far: the given one, or a generated one. */
function merchantOrderNoOf(s: SimState, merchant: string, input: CreateOrderInput, n: string): string {
  const merchantOrderNo = input.merchantOrderNo ?? `M${Date.now()}${s.tag}${n}`;
  if (merchantOrderNo.length < 1 || merchantOrderNo.length > 64)
    throw invalid('merchantOrderNo must be 1 to 64 characters');
  if (orderOfMerchant(s, merchant, merchantOrderNo)) {
    throw new AppError(ErrorCodes.ORDER_CONFLICT, `merchantOrderNo ${merchantOrderNo} already exists`, {
      details: { merchantOrderNo },
    });
  }
  return merchantOrderNo;
}

export function createOrder(s: SimState, type: OrderType, input: CreateOrderInput): SandboxOrder {
  const { merchant, currency, createdVia } = checkOrderInput(s, type, input);
  const orderFaults = checkFaults(input.faults);
  const n = next(s);
  const merchantOrderNo = merchantOrderNoOf(s, merchant.ref, input, n);
  const at = now();
  const order: SandboxOrder = {
    orderNo: orderNoOf(s, type, n),
    merchant: merchant.ref,
    merchantNo: merchant.merchantNo,
    merchantOrderNo,
    type,
    amount: input.amount,
    currency: currency.currency,
    quantity:
      type === 'payin' ? (input.quantity ?? multiplyDecimal(input.amount, USDT_RATES[currency.currency] ?? '1')) : null,
    state: PENDING_STATE,
    createdVia,
    callbackUrl: input.callbackUrl ?? null,
    createdAt: at,
    finishedAt: null,
    history: [{ state: PENDING_STATE, at }],
    faults: orderFaults,
  };
  s.orders.set(order.orderNo, order);
  indexOrder(s, order);
  s.opts.logger.info(
    { orderNo: order.orderNo, merchant: merchant.ref, merchantOrderNo, type, createdVia },
    'order created',
  );
  return order;
}

/** Refuse a move the platform would not make. Pay-ins may go 1→3, 1→6 and 3→6; payouts 1→4 or 1→5. */
function checkMove(order: SandboxOrder, state: number): void {
  const finals = FINAL_STATES[order.type];
  if (!finals.includes(state)) {
    throw invalid(`a ${order.type} can be moved to ${finals.join(' or ')}, not ${state}`, { field: 'state' });
  }
  // Final is final otherwise.
  const allowed =
    order.state === PENDING_STATE ||
    (order.type === 'payin' && order.state === PayinState.Success && state === PayinState.Released);
  if (!allowed) {
    throw new AppError(
      ErrorCodes.ORDER_CONFLICT,
      `order ${order.orderNo} is in state ${order.state}; cannot move to ${state}`,
      {
        details: { orderNo: order.orderNo, state: order.state, requested: state },
      },
    );
  }
}

/** Send a held callback, or schedule it. */
export function dispatch(s: SimState, d: Delivery): void {
  if (s.faults.outOfOrder && d.event === 'genuine') {
    d.status = 'held';
    s.held.push(d);
    s.events.emit('held', d);
    return;
  }
  s.scheduler.schedule(d);
}

/** The callback of `order`'s move to `state` at `at`, and with the `stale` fault the stale one that follows it. */
function sendCallbacks(s: SimState, order: SandboxOrder, state: number, at: Date, url: string): Delivery[] {
  const created: Delivery[] = [];
  const payTime = order.type === 'payout' && state === PayoutState.Refused ? null : new Date(order.finishedAt!);
  const d = makeDelivery(s, order, 'genuine', state, recordFor(order, state, payTime), url);
  created.push(d);
  dispatch(s, d);
  if (order.type === 'payout' && order.faults.stale) {
    const other = state === PayoutState.Succeeded ? PayoutState.Refused : PayoutState.Succeeded;
    const stale = makeDelivery(s, order, 'stale', other, recordFor(order, other, new Date(at.getTime() - 60_000)), url);
    stale.status = 'held';
    created.push(stale);
    void s.scheduler.settled(d).then((settled) => {
      if (settled.status !== 'cancelled' && stale.status === 'held') s.scheduler.schedule(stale);
    });
  }
  return created;
}

export function finalize(
  s: SimState,
  ref: string,
  state: number,
  merchant?: string,
): { order: SandboxOrder; deliveries: Delivery[] } {
  const order = getOrder(s, ref, merchant);
  checkMove(order, state);
  const sendsCallback = CALLBACK_SENT_STATES[order.type].includes(state) && order.createdVia === 'api';
  // Resolve the URL before changing anything, so a missing URL refuses the whole step.
  const url = sendsCallback ? urlFor(s, order) : undefined;
  const at = new Date();
  order.state = state;
  order.finishedAt ??= at.toISOString();
  order.history.push({ state, at: at.toISOString() });
  s.events.emit('state', order);
  s.opts.logger.info({ orderNo: order.orderNo, state }, 'order state changed');
  return { order, deliveries: url ? sendCallbacks(s, order, state, at, url) : [] };
}
