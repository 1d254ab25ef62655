/**
 * The simulator's state (orders, deliveries, faults, console settings) and the small steps every operation of
 * simulator.ts shares: numbering, checks of input, the callback URL of an order, its record, a new delivery.
 */
import { randomBytes } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { payinRecordJson, payoutRecordJson } from '@mcb/core/callback';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { checkCallbackUrl } from './callback-url.ts';
import type { DeliveryScheduler } from './delivery.ts';
import {
  DEFAULT_FAULTS,
  type Delivery,
  type DeliveryEvent,
  type GlobalFaults,
  type OrderFaults,
  type OrderType,
  type SandboxOrder,
} from './model.ts';
import type { SimulatorOptions } from './simulator.ts';

/** What one simulator holds; `reset` empties it (the tag and the numbering go on). */
export interface SimState {
  readonly opts: SimulatorOptions;
  readonly events: EventEmitter;
  readonly scheduler: DeliveryScheduler;
  /** A per-instance tag keeps order numbers unique across resets and restarts: receivers' dedup keys never collide. */
  readonly tag: string;
  seq: number;
  orders: Map<string, SandboxOrder>;
  byMerchantOrderNo: Map<string, SandboxOrder>;
  deliveries: Delivery[];
  /** Genuine callbacks held while `outOfOrder` is on, in order of completion. */
  held: Delivery[];
  faults: GlobalFaults;
  /** The console's default callback URLs by kind. */
  urls: { payin: string | null; payout: string | null };
}

export function createState(opts: SimulatorOptions, events: EventEmitter, scheduler: DeliveryScheduler): SimState {
  return {
    opts,
    events,
    scheduler,
    tag: randomBytes(3).toString('hex').toUpperCase(),
    seq: 0,
    orders: new Map(),
    byMerchantOrderNo: new Map(),
    deliveries: [],
    held: [],
    faults: { ...DEFAULT_FAULTS },
    urls: { payin: opts.payinCallbackUrl ?? null, payout: opts.payoutCallbackUrl ?? null },
  };
}

/** Forget every order and delivery, restore faults and console settings. */
export function emptyState(s: SimState): void {
  s.orders = new Map();
  s.byMerchantOrderNo = new Map();
  s.deliveries = [];
  s.held = [];
  s.faults = { ...DEFAULT_FAULTS };
  s.urls = { payin: s.opts.payinCallbackUrl ?? null, payout: s.opts.payoutCallbackUrl ?? null };
}

export const now = () => new Date().toISOString();

/** The next number of this simulator's sequence, six digits. */
export const next = (s: SimState) => String(++s.seq).padStart(6, '0');

export function invalid(message: string, details?: Record<string, unknown>): AppError {
  return new AppError(ErrorCodes.REQUEST_INVALID, message, { details });
}

export function checkUrl(s: SimState, url: string, field = 'callbackUrl'): void {
  const problem = checkCallbackUrl(url, s.opts.allowLocalCallbacks);
  if (problem) throw invalid(problem, { field });
}

export function checkFaults(f: OrderFaults | undefined): OrderFaults {
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

export function findOrder(s: SimState, ref: string): SandboxOrder | undefined {
  return s.orders.get(ref) ?? s.byMerchantOrderNo.get(ref);
}

export function getOrder(s: SimState, ref: string): SandboxOrder {
  const o = findOrder(s, ref);
  if (!o) throw new AppError(ErrorCodes.NOT_FOUND, `no order ${ref}`, { details: { ref } });
  return o;
}

/** Where an order's callbacks go: its own URL, else the console default of its kind. */
export function urlFor(s: SimState, order: Pick<SandboxOrder, 'type' | 'callbackUrl'>): string {
  const url = order.callbackUrl ?? s.urls[order.type];
  if (!url) {
    throw invalid(`no callback URL: the order has none and the console default for ${order.type} is not set`, {
      field: order.type === 'payin' ? 'payinCallbackUrl' : 'payoutCallbackUrl',
    });
  }
  return url;
}

/** The callback record of `order` in `state`, as JSON text (amount and quantity may be forged). */
export function recordFor(
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

/** A new delivery of `record` to `url`, listed but not yet scheduled. */
export function makeDelivery(
  s: SimState,
  order: SandboxOrder,
  event: DeliveryEvent,
  state: number,
  record: string,
  url: string,
): Delivery {
  const d: Delivery = {
    id: `D${s.tag}${next(s)}`,
    orderNo: order.orderNo,
    merchantOrderNo: order.merchantOrderNo,
    type: order.type,
    event,
    state,
    url,
    record,
    minBlocks: order.faults.minBlocks ?? s.faults.minBlocks,
    duplicate: order.faults.duplicate ?? s.faults.duplicate,
    status: 'scheduled',
    attempts: [],
    nextAttemptAt: null,
    createdAt: now(),
  };
  s.deliveries.push(d);
  return d;
}

/** The order number the platform gives an order of `type` numbered `n`. */
export const orderNoOf = (s: SimState, type: OrderType, n: string) => `${type === 'payin' ? 'PI' : 'PO'}${s.tag}${n}`;
