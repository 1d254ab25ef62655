import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { CALLBACK_SENT_STATES, FINAL_STATES, PayinState, PayoutState } from '@mcb/core/spec';
import { checkCallbackUrl } from './callback-url.ts';
import { findCurrency, USDT_RATES } from './catalog.ts';
import { fitsDecimals, multiplyDecimal } from './decimal.ts';
import { createDeliveryScheduler, type EncryptRecord } from './delivery.ts';
import {
  DEFAULT_FAULTS,
  PENDING_STATE,
  type Attempt,
  type Delivery,
  type DeliveryEvent,
  type GlobalFaults,
  type OrderFaults,
  type OrderType,
  type SandboxOrder,
} from './model.ts';
import { payinRecordJson, payoutRecordJson } from '@mcb/core/callback';

/** Options of {@link createSimulator}; see `SandboxOptions` in app.ts for their meaning and defaults. */
export interface SimulatorOptions {
  merchantNo: string;
  merchantPublicKeyPem: string;
  timeScale: number;
  firstAttemptDelayMs: number;
  replyTimeoutMs: number;
  payinCallbackUrl: string | undefined;
  payoutCallbackUrl: string | undefined;
  allowLocalCallbacks: boolean;
  encrypt: EncryptRecord;
  logger: Logger;
}

/** What a control client passes to create an order. */
export interface CreateOrderInput {
  /** Generated when omitted. */
  merchantOrderNo?: string;
  currency: string;
  /** Fiat amount as decimal text, at most the currency's decimals. */
  amount: string;
  /** Pay-ins: USDT quantity; computed from a fixed rate when omitted. */
  quantity?: string;
  /** Overrides the console default for this order's kind. */
  callbackUrl?: string;
  /** Payouts: `console` payouts never produce callbacks. @defaultValue 'api' */
  createdVia?: 'api' | 'console';
  faults?: OrderFaults;
}

/** What can be forged (`POST /control/forge`). */
export type ForgeWhat = 'amount' | 'state' | 'unknown-order';

/** What to forge and for which order (`ref`: platform or merchant order number). */
export interface ForgeInput {
  what: ForgeWhat;
  ref?: string;
  /** For `unknown-order`: the record's kind. @defaultValue 'payin' */
  type?: OrderType;
  /** Where to send it; defaults to the order's URL or the console default. */
  callbackUrl?: string;
}

/** Event names of {@link Simulator.events}. */
export type SimulatorEventName = 'attempt' | 'delivered' | 'gave-up' | 'cancelled' | 'settled' | 'held' | 'state';

/** The platform's state and the operations the control API, tests and the demo drive. */
export interface Simulator {
  readonly merchantNo: string;
  /** `attempt` (delivery, attempt), `delivered`/`gave-up`/`cancelled`/`settled`/`held` (delivery), `state` (order). */
  readonly events: EventEmitter;
  createPayin(input: CreateOrderInput): SandboxOrder;
  createPayout(input: CreateOrderInput): SandboxOrder;
  /** Move an order to a state: pay-in 3 or 6 (6 sends a callback), payout 4 or 5 (sends one if created via the API). */
  finalize(ref: string, state: number): { order: SandboxOrder; deliveries: Delivery[] };
  /** Send a callback whose content Get order contradicts. */
  forge(input: ForgeInput): Delivery;
  /** An order by platform or merchant order number. */
  find(ref: string): SandboxOrder | undefined;
  get(ref: string): SandboxOrder;
  list(filter?: { type?: OrderType }): SandboxOrder[];
  deliveriesOf(orderNo: string): Delivery[];
  allDeliveries(): Delivery[];
  /** Resolve once the delivery is delivered, given up or cancelled. */
  settled(delivery: Delivery): Promise<Delivery>;
  faults(): Readonly<GlobalFaults>;
  /** Change global faults; switching `outOfOrder` off releases held callbacks in reverse order. */
  setFaults(patch: Partial<GlobalFaults>): Readonly<GlobalFaults>;
  setOrderFaults(ref: string, patch: OrderFaults): SandboxOrder;
  /** Send held callbacks now, newest first; resolves when each first attempt has finished. */
  release(): Promise<Delivery[]>;
  settings(): { payinCallbackUrl: string | null; payoutCallbackUrl: string | null; allowLocalCallbacks: boolean };
  /** The console's default callback URLs (null clears one). */
  setCallbackUrls(patch: { payinCallbackUrl?: string | null; payoutCallbackUrl?: string | null }): void;
  /** Forget every order and delivery, cancel timers, restore faults and console settings. */
  reset(): void;
  close(): Promise<void>;
}

function invalid(message: string, details?: Record<string, unknown>): AppError {
  return new AppError(ErrorCodes.REQUEST_INVALID, message, { details });
}

export function createSimulator(opts: SimulatorOptions): Simulator {
  const events = new EventEmitter();
  events.setMaxListeners(0);
  const scheduler = createDeliveryScheduler({ ...opts, events });
  // A per-instance tag keeps order numbers unique across resets and restarts, so receivers' dedup keys never collide.
  const tag = randomBytes(3).toString('hex').toUpperCase();
  let seq = 0;
  let orders = new Map<string, SandboxOrder>();
  let byMerchantOrderNo = new Map<string, SandboxOrder>();
  let deliveries: Delivery[] = [];
  let held: Delivery[] = [];
  let faults: GlobalFaults = { ...DEFAULT_FAULTS };
  let urls = { payin: opts.payinCallbackUrl ?? null, payout: opts.payoutCallbackUrl ?? null };

  const now = () => new Date().toISOString();
  const next = () => String(++seq).padStart(6, '0');

  function checkUrl(url: string, field = 'callbackUrl'): void {
    const problem = checkCallbackUrl(url, opts.allowLocalCallbacks);
    if (problem) throw invalid(problem, { field });
  }

  function checkFaults(f: OrderFaults | undefined): OrderFaults {
    const out: OrderFaults = {};
    if (f?.duplicate !== undefined) {
      if (!Number.isInteger(f.duplicate) || f.duplicate < 1 || f.duplicate > 10)
        throw invalid('duplicate must be 1 to 10');
      out.duplicate = f.duplicate;
    }
    if (f?.minBlocks !== undefined) {
      if (!Number.isInteger(f.minBlocks) || f.minBlocks < 1 || f.minBlocks > 16)
        throw invalid('minBlocks must be 1 to 16');
      out.minBlocks = f.minBlocks;
    }
    if (f?.stale !== undefined) out.stale = f.stale;
    return out;
  }

  function create(type: OrderType, input: CreateOrderInput): SandboxOrder {
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
    if (input.callbackUrl !== undefined) checkUrl(input.callbackUrl);
    const createdVia = input.createdVia ?? 'api';
    if (type === 'payin' && createdVia !== 'api')
      throw invalid('pay-ins are created through the API only', { field: 'createdVia' });
    const orderFaults = checkFaults(input.faults);
    const n = next();
    const merchantOrderNo = input.merchantOrderNo ?? `M${Date.now()}${tag}${n}`;
    if (merchantOrderNo.length < 1 || merchantOrderNo.length > 64)
      throw invalid('merchantOrderNo must be 1 to 64 characters');
    if (byMerchantOrderNo.has(merchantOrderNo)) {
      throw new AppError(ErrorCodes.ORDER_CONFLICT, `merchantOrderNo ${merchantOrderNo} already exists`, {
        details: { merchantOrderNo },
      });
    }
    const at = now();
    const order: SandboxOrder = {
      orderNo: `${type === 'payin' ? 'PI' : 'PO'}${tag}${n}`,
      merchantNo: opts.merchantNo,
      merchantOrderNo,
      type,
      amount: input.amount,
      currency: currency.currency,
      quantity:
        type === 'payin'
          ? (input.quantity ?? multiplyDecimal(input.amount, USDT_RATES[currency.currency] ?? '1'))
          : null,
      state: PENDING_STATE,
      createdVia,
      callbackUrl: input.callbackUrl ?? null,
      createdAt: at,
      finishedAt: null,
      history: [{ state: PENDING_STATE, at }],
      faults: orderFaults,
    };
    orders.set(order.orderNo, order);
    byMerchantOrderNo.set(merchantOrderNo, order);
    opts.logger.info({ orderNo: order.orderNo, merchantOrderNo, type, createdVia }, 'order created');
    return order;
  }

  function find(ref: string): SandboxOrder | undefined {
    return orders.get(ref) ?? byMerchantOrderNo.get(ref);
  }

  function get(ref: string): SandboxOrder {
    const o = find(ref);
    if (!o) throw new AppError(ErrorCodes.NOT_FOUND, `no order ${ref}`, { details: { ref } });
    return o;
  }

  function urlFor(order: Pick<SandboxOrder, 'type' | 'callbackUrl'>): string {
    const url = order.callbackUrl ?? urls[order.type];
    if (!url) {
      throw invalid(`no callback URL: the order has none and the console default for ${order.type} is not set`, {
        field: order.type === 'payin' ? 'payinCallbackUrl' : 'payoutCallbackUrl',
      });
    }
    return url;
  }

  function recordFor(
    order: SandboxOrder,
    state: number,
    payTime: Date | null,
    amount = order.amount,
    quantity = order.quantity,
  ): string {
    return order.type === 'payin'
      ? payinRecordJson({
          orderNo: order.orderNo,
          merchantNo: order.merchantNo,
          merchantOrderNo: order.merchantOrderNo,
          payTime: payTime ?? new Date(),
          orderState: state,
          quantity: quantity ?? '0',
          fiatAmount: amount,
        })
      : payoutRecordJson({
          orderNo: order.orderNo,
          merchantNo: order.merchantNo,
          merchantOrderNo: order.merchantOrderNo,
          payTime,
          state,
        });
  }

  function makeDelivery(
    order: SandboxOrder,
    event: DeliveryEvent,
    state: number,
    record: string,
    url: string,
  ): Delivery {
    const d: Delivery = {
      id: `D${tag}${next()}`,
      orderNo: order.orderNo,
      merchantOrderNo: order.merchantOrderNo,
      type: order.type,
      event,
      state,
      url,
      record,
      minBlocks: order.faults.minBlocks ?? faults.minBlocks,
      duplicate: order.faults.duplicate ?? faults.duplicate,
      status: 'scheduled',
      attempts: [],
      nextAttemptAt: null,
      createdAt: now(),
    };
    deliveries.push(d);
    return d;
  }

  function dispatch(d: Delivery): void {
    if (faults.outOfOrder && d.event === 'genuine') {
      d.status = 'held';
      held.push(d);
      events.emit('held', d);
      return;
    }
    scheduler.schedule(d);
  }

  function finalize(ref: string, state: number): { order: SandboxOrder; deliveries: Delivery[] } {
    const order = get(ref);
    const finals = FINAL_STATES[order.type];
    if (!finals.includes(state)) {
      throw invalid(`a ${order.type} can be moved to ${finals.join(' or ')}, not ${state}`, { field: 'state' });
    }
    // Pay-ins may go 1→3, 1→6 and 3→6; payouts 1→4 or 1→5. Final is final otherwise.
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
    const sendsCallback = CALLBACK_SENT_STATES[order.type].includes(state) && order.createdVia === 'api';
    // Resolve the URL before changing anything, so a missing URL refuses the whole step.
    const url = sendsCallback ? urlFor(order) : undefined;
    const at = new Date();
    order.state = state;
    order.finishedAt ??= at.toISOString();
    order.history.push({ state, at: at.toISOString() });
    events.emit('state', order);
    opts.logger.info({ orderNo: order.orderNo, state }, 'order state changed');
    const created: Delivery[] = [];
    if (url) {
      const payTime = order.type === 'payout' && state === PayoutState.Refused ? null : new Date(order.finishedAt);
      const d = makeDelivery(order, 'genuine', state, recordFor(order, state, payTime), url);
      created.push(d);
      dispatch(d);
      if (order.type === 'payout' && order.faults.stale) {
        const other = state === PayoutState.Succeeded ? PayoutState.Refused : PayoutState.Succeeded;
        const stale = makeDelivery(
          order,
          'stale',
          other,
          recordFor(order, other, new Date(at.getTime() - 60_000)),
          url,
        );
        stale.status = 'held';
        created.push(stale);
        void scheduler.settled(d).then((s) => {
          if (s.status !== 'cancelled' && stale.status === 'held') scheduler.schedule(stale);
        });
      }
    }
    return { order, deliveries: created };
  }

  function forge(input: ForgeInput): Delivery {
    if (input.callbackUrl !== undefined) checkUrl(input.callbackUrl);
    if (input.what === 'unknown-order') {
      const type = input.type ?? 'payin';
      const n = next();
      // Never registered: Get order answers "not found" for it.
      const ghost: SandboxOrder = {
        orderNo: `${type === 'payin' ? 'PI' : 'PO'}${tag}${n}`,
        merchantNo: opts.merchantNo,
        merchantOrderNo: `FORGED${tag}${n}`,
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
      const d = makeDelivery(ghost, 'forged', state, recordFor(ghost, state, new Date()), urlFor(ghost));
      scheduler.schedule(d);
      return d;
    }
    if (!input.ref) throw invalid('forge needs the order (ref) unless what is unknown-order', { field: 'ref' });
    const order = get(input.ref);
    const url = input.callbackUrl ?? urlFor(order);
    let d: Delivery;
    if (input.what === 'amount') {
      if (order.type !== 'payin')
        throw invalid('a payout record carries no amount; forge its state instead', { field: 'what' });
      const amount = multiplyDecimal(order.amount, '10');
      const quantity = multiplyDecimal(order.quantity ?? '0', '10');
      d = makeDelivery(
        order,
        'forged',
        PayinState.Released,
        recordFor(order, PayinState.Released, new Date(), amount, quantity),
        url,
      );
    } else {
      // A state the order never reached: 6 for a pay-in that has not been released, the other final state for a payout.
      let state: number;
      if (order.type === 'payin') {
        if (order.state === PayinState.Released)
          throw invalid('this pay-in did reach 6; forge its amount instead', { field: 'what' });
        state = PayinState.Released;
      } else {
        state = order.state === PayoutState.Succeeded ? PayoutState.Refused : PayoutState.Succeeded;
      }
      d = makeDelivery(order, 'forged', state, recordFor(order, state, new Date()), url);
    }
    scheduler.schedule(d);
    return d;
  }

  async function release(): Promise<Delivery[]> {
    const batch = held.reverse();
    held = [];
    for (const d of batch) {
      if (d.status !== 'held') continue;
      await scheduler.attemptNow(d);
    }
    return batch;
  }

  return {
    merchantNo: opts.merchantNo,
    events,
    createPayin: (input) => create('payin', input),
    createPayout: (input) => create('payout', input),
    finalize,
    forge,
    find,
    get,
    list: (filter) => [...orders.values()].filter((o) => !filter?.type || o.type === filter.type),
    deliveriesOf: (orderNo) => deliveries.filter((d) => d.orderNo === orderNo),
    allDeliveries: () => [...deliveries],
    settled: (d) => scheduler.settled(d),
    faults: () => ({ ...faults }),
    setFaults(patch) {
      const nextFaults = { ...faults, ...patch };
      const f = checkFaults({ duplicate: nextFaults.duplicate, minBlocks: nextFaults.minBlocks });
      if (!['off', 'error', 'hang'].includes(nextFaults.apiDown)) throw invalid('apiDown must be off, error or hang');
      if (!Number.isInteger(nextFaults.apiDelayMs) || nextFaults.apiDelayMs < 0 || nextFaults.apiDelayMs > 600_000) {
        throw invalid('apiDelayMs must be 0 to 600000');
      }
      const wasHolding = faults.outOfOrder;
      faults = { ...nextFaults, duplicate: f.duplicate ?? 1, minBlocks: f.minBlocks ?? 1 };
      if (wasHolding && !faults.outOfOrder) void release();
      return { ...faults };
    },
    setOrderFaults(ref, patch) {
      const order = get(ref);
      order.faults = { ...order.faults, ...checkFaults(patch) };
      return order;
    },
    release,
    settings: () => ({
      payinCallbackUrl: urls.payin,
      payoutCallbackUrl: urls.payout,
      allowLocalCallbacks: opts.allowLocalCallbacks,
    }),
    setCallbackUrls(patch) {
      if (patch.payinCallbackUrl) checkUrl(patch.payinCallbackUrl, 'payinCallbackUrl');
      if (patch.payoutCallbackUrl) checkUrl(patch.payoutCallbackUrl, 'payoutCallbackUrl');
      if (patch.payinCallbackUrl !== undefined) urls.payin = patch.payinCallbackUrl;
      if (patch.payoutCallbackUrl !== undefined) urls.payout = patch.payoutCallbackUrl;
    },
    reset() {
      scheduler.cancelAll();
      // Held and stale deliveries never reached the scheduler: settle them here so nobody waits forever.
      for (const d of deliveries) {
        if (d.status === 'held') {
          d.status = 'cancelled';
          events.emit('cancelled', d);
          events.emit('settled', d);
        }
      }
      orders = new Map();
      byMerchantOrderNo = new Map();
      deliveries = [];
      held = [];
      faults = { ...DEFAULT_FAULTS };
      urls = { payin: opts.payinCallbackUrl ?? null, payout: opts.payoutCallbackUrl ?? null };
    },
    close: () => scheduler.close(),
  };
}

export type { Attempt, Delivery, GlobalFaults, OrderFaults, SandboxOrder };
