import { EventEmitter } from 'node:events';
import type { Logger } from '@mcb/core/logger';
import { createDeliveryScheduler, type EncryptRecord } from './delivery.ts';
import type { Attempt, Delivery, GlobalFaults, OrderFaults, OrderType, SandboxOrder } from './model.ts';
import { forge } from './sim-forge.ts';
import { createOrder, finalize } from './sim-orders.ts';
import { checkFaults, checkUrl, createState, emptyState, findOrder, getOrder, invalid } from './sim-state.ts';

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
    merchantNo: opts.merchantNo,
    events,
    createPayin: (input) => createOrder(s, 'payin', input),
    createPayout: (input) => createOrder(s, 'payout', input),
    finalize: (ref, state) => finalize(s, ref, state),
    forge: (input) => forge(s, input),
    find: (ref) => findOrder(s, ref),
    get: (ref) => getOrder(s, ref),
    list: (filter) => [...s.orders.values()].filter((o) => !filter?.type || o.type === filter.type),
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
    setOrderFaults(ref, patch) {
      const order = getOrder(s, ref);
      order.faults = { ...order.faults, ...checkFaults(patch) };
      return order;
    },
    release,
    settings: () => ({
      payinCallbackUrl: s.urls.payin,
      payoutCallbackUrl: s.urls.payout,
      allowLocalCallbacks: opts.allowLocalCallbacks,
    }),
    setCallbackUrls(patch) {
      if (patch.payinCallbackUrl) checkUrl(s, patch.payinCallbackUrl, 'payinCallbackUrl');
      if (patch.payoutCallbackUrl) checkUrl(s, patch.payoutCallbackUrl, 'payoutCallbackUrl');
      if (patch.payinCallbackUrl !== undefined) s.urls.payin = patch.payinCallbackUrl;
      if (patch.payoutCallbackUrl !== undefined) s.urls.payout = patch.payoutCallbackUrl;
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

export type { Attempt, Delivery, GlobalFaults, OrderFaults, SandboxOrder };
