import { EventEmitter } from 'node:events';
import type { Logger } from '@mcb/core/logger';
import { createDeliveryScheduler, type EncryptRecord } from './delivery.ts';
import type {
  Attempt,
  Delivery,
  GlobalFaults,
  OrderFaults,
  OrderType,
  SandboxMerchant,
  SandboxOrder,
} from './model.ts';
import { forge } from './sim-forge.ts';
import { createOrder, finalize } from './sim-orders.ts';
import {
  checkFaults,
  checkUrl,
  createState,
  emptyState,
  findOrder,
  getOrder,
  invalid,
  merchantByNo,
  merchantOf,
  type SimState,
} from './sim-state.ts';

/** Options of {@link createSimulator}; see `SandboxOptions` in app.ts for their meaning and defaults. */
export interface SimulatorOptions {
  /** The merchant accounts, the first one first, each with its console default URLs resolved (checked, no `{ref}`). */
  merchants: readonly SandboxMerchant[];
  timeScale: number;
  firstAttemptDelayMs: number;
  replyTimeoutMs: number;
  allowLocalCallbacks: boolean;
  encrypt: EncryptRecord;
  logger: Logger;
}

/** What a control client passes to create an order. */
export interface CreateOrderInput {
  /** The ref of the merchant account the order is for. @defaultValue the first account */
  merchant?: string;
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
  /** The merchant account: whose order `ref` is, or whose number an `unknown-order` record carries. @defaultValue the first */
  merchant?: string;
  /** For `unknown-order`: the record's kind. @defaultValue 'payin' */
  type?: OrderType;
  /** Where to send it; defaults to the order's URL or the console default. */
  callbackUrl?: string;
}

/** Event names of {@link Simulator.events}. */
export type SimulatorEventName = 'attempt' | 'delivered' | 'gave-up' | 'cancelled' | 'settled' | 'held' | 'state';

/** A merchant account as the control API shows it (its public key left out). */
export interface MerchantView {
  ref: string;
  merchantNo: string;
  payinCallbackUrl: string | null;
  payoutCallbackUrl: string | null;
}

/**
 * The platform's state and the operations the control API, tests and the demo drive. Where an operation takes a
 * `merchant` (a ref), it is for that account; without one, for the first account (the only one by default).
 */
export interface Simulator {
  /** The first merchant account's number. */
  readonly merchantNo: string;
  /** Every merchant account, the first one first. */
  merchants(): MerchantView[];
  /** The account whose number is `merchantNo` (how Get order and the catalog know who asks). */
  merchantByNo(merchantNo: string): MerchantView | undefined;
  /** `attempt` (delivery, attempt), `delivered`/`gave-up`/`cancelled`/`settled`/`held` (delivery), `state` (order). */
  readonly events: EventEmitter;
  createPayin(input: CreateOrderInput): SandboxOrder;
  createPayout(input: CreateOrderInput): SandboxOrder;
  /** Move an order to a state: pay-in 3 or 6 (6 sends a callback), payout 4 or 5 (sends one if created via the API). */
  finalize(ref: string, state: number, merchant?: string): { order: SandboxOrder; deliveries: Delivery[] };
  /** Send a callback whose content Get order contradicts. */
  forge(input: ForgeInput): Delivery;
  /** An order by platform or merchant order number (of `merchant`, or of the first account that has it). */
  find(ref: string, merchant?: string): SandboxOrder | undefined;
  get(ref: string, merchant?: string): SandboxOrder;
  list(filter?: { type?: OrderType; merchant?: string }): SandboxOrder[];
  deliveriesOf(orderNo: string): Delivery[];
  allDeliveries(): Delivery[];
  /** Resolve once the delivery is delivered, given up or cancelled. */
  settled(delivery: Delivery): Promise<Delivery>;
  faults(): Readonly<GlobalFaults>;
  /** Change global faults; switching `outOfOrder` off releases held callbacks in reverse order. */
  setFaults(patch: Partial<GlobalFaults>): Readonly<GlobalFaults>;
  setOrderFaults(ref: string, patch: OrderFaults, merchant?: string): SandboxOrder;
  /** Send held callbacks now, newest first; resolves when each first attempt has finished. */
  release(): Promise<Delivery[]>;
  /** A merchant's console defaults (the first account's unless `merchant` names one). */
  settings(merchant?: string): {
    payinCallbackUrl: string | null;
    payoutCallbackUrl: string | null;
    allowLocalCallbacks: boolean;
  };
  /** A merchant's console default callback URLs (null clears one; the first account's unless `merchant` says). */
  setCallbackUrls(patch: {
    merchant?: string;
    payinCallbackUrl?: string | null;
    payoutCallbackUrl?: string | null;
  }): void;
  /** Forget every order and delivery, cancel timers, restore faults and console settings. */
  reset(): void;
  close(): Promise<void>;
}

export function createSimulator(opts: SimulatorOptions): Simulator {
  const events = new EventEmitter();
  events.setMaxListeners(0);
  const scheduler = createDeliveryScheduler({ ...opts, events });
  const s = createState(opts, events, scheduler);

  async function release(): Promise<Delivery[]> {
    const batch = s.held.reverse();
    s.held = [];
    for (const d of batch) {
      if (d.status !== 'held') continue;
      await scheduler.attemptNow(d);
    }
    return batch;
  }

  return {
    merchantNo: merchantOf(s, undefined).merchantNo,
    merchants: () => [...s.merchants.values()].map((m) => viewOf(s, m)),
    merchantByNo: (merchantNo) => {
      const m = merchantByNo(s, merchantNo);
      return m && viewOf(s, m);
    },
    events,
    createPayin: (input) => createOrder(s, 'payin', input),
    createPayout: (input) => createOrder(s, 'payout', input),
    finalize: (ref, state, merchant) => finalize(s, ref, state, merchant),
    forge: (input) => forge(s, input),
    find: (ref, merchant) => findOrder(s, ref, merchant),
    get: (ref, merchant) => getOrder(s, ref, merchant),
    list: (filter) =>
      [...s.orders.values()].filter(
        (o) => (!filter?.type || o.type === filter.type) && (!filter?.merchant || o.merchant === filter.merchant),
      ),
    deliveriesOf: (orderNo) => s.deliveries.filter((d) => d.orderNo === orderNo),
    allDeliveries: () => [...s.deliveries],
    settled: (d) => scheduler.settled(d),
    faults: () => ({ ...s.faults }),
    setFaults(patch) {
      const wasHolding = s.faults.outOfOrder;
      s.faults = mergeFaults(s.faults, patch);
      if (wasHolding && !s.faults.outOfOrder) void release();
      return { ...s.faults };
    },
    setOrderFaults(ref, patch, merchant) {
      const order = getOrder(s, ref, merchant);
      order.faults = { ...order.faults, ...checkFaults(patch) };
      return order;
    },
    release,
    settings: (merchant) => {
      const { payinCallbackUrl, payoutCallbackUrl } = viewOf(s, merchantOf(s, merchant));
      return { payinCallbackUrl, payoutCallbackUrl, allowLocalCallbacks: opts.allowLocalCallbacks };
    },
    setCallbackUrls(patch) {
      const urls = s.urls.get(merchantOf(s, patch.merchant).ref)!;
      if (patch.payinCallbackUrl) checkUrl(s, patch.payinCallbackUrl, 'payinCallbackUrl');
      if (patch.payoutCallbackUrl) checkUrl(s, patch.payoutCallbackUrl, 'payoutCallbackUrl');
      if (patch.payinCallbackUrl !== undefined) urls.payin = patch.payinCallbackUrl;
      if (patch.payoutCallbackUrl !== undefined) urls.payout = patch.payoutCallbackUrl;
    },
    reset() {
      scheduler.cancelAll();
      // Held and stale deliveries never reached the scheduler: settle them here so nobody waits forever.
      for (const d of s.deliveries) {
        if (d.status === 'held') {
          d.status = 'cancelled';
          events.emit('cancelled', d);
          events.emit('settled', d);
        }
      }
      emptyState(s);
    },
    close: () => scheduler.close(),
  };
}

/** A merchant account as shown: its ref, number and console URLs now. */
function viewOf(s: SimState, m: SandboxMerchant): MerchantView {
  const urls = s.urls.get(m.ref);
  return {
    ref: m.ref,
    merchantNo: m.merchantNo,
    payinCallbackUrl: urls?.payin ?? null,
    payoutCallbackUrl: urls?.payout ?? null,
  };
}

/** `patch` applied to `faults`, checked. */
function mergeFaults(faults: GlobalFaults, patch: Partial<GlobalFaults>): GlobalFaults {
  const nextFaults = { ...faults, ...patch };
  const f = checkFaults({ duplicate: nextFaults.duplicate, minBlocks: nextFaults.minBlocks });
  if (!['off', 'error', 'hang'].includes(nextFaults.apiDown)) throw invalid('apiDown must be off, error or hang');
  if (!Number.isInteger(nextFaults.apiDelayMs) || nextFaults.apiDelayMs < 0 || nextFaults.apiDelayMs > 600_000) {
    throw invalid('apiDelayMs must be 0 to 600000');
  }
  return { ...nextFaults, duplicate: f.duplicate ?? 1, minBlocks: f.minBlocks ?? 1 };
}

export type { Attempt, Delivery, GlobalFaults, OrderFaults, SandboxMerchant, SandboxOrder };
