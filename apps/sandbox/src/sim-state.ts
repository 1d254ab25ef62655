/**
 * The simulator's state (merchant accounts, orders, deliveries, faults, console settings) and the small steps every
 * operation of simulator.ts shares: numbering, checks of input, the merchant an operation is for, the callback URL of
 * an order, its record, a new delivery.
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
  type SandboxMerchant,
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
  /** The merchant accounts by ref, the first one first (the one an operation naming none is for). */
  readonly merchants: ReadonlyMap<string, SandboxMerchant>;
  orders: Map<string, SandboxOrder>;
  /** Each merchant's orders by its own order number (unique per merchant, as on the platform). */
  byMerchantOrderNo: Map<string, Map<string, SandboxOrder>>;
  deliveries: Delivery[];
  /** Genuine callbacks held while `outOfOrder` is on, in order of completion. */
  held: Delivery[];
  faults: GlobalFaults;
  /** Each merchant's console default callback URLs by kind. */
  urls: Map<string, ConsoleUrls>;
}

/** A merchant's console default callback URLs. */
export interface ConsoleUrls {
  payin: string | null;
  payout: string | null;
}

const consoleUrls = (opts: SimulatorOptions) =>
  new Map(
    opts.merchants.map((m) => [m.ref, { payin: m.payinCallbackUrl ?? null, payout: m.payoutCallbackUrl ?? null }]),
  );

export function createState(opts: SimulatorOptions, events: EventEmitter, scheduler: DeliveryScheduler): SimState {
  return {
    opts,
    events,
    scheduler,
    tag: randomBytes(3).toString('hex').toUpperCase(),
    seq: 0,
    merchants: new Map(opts.merchants.map((m) => [m.ref, m])),
    orders: new Map(),
    byMerchantOrderNo: new Map(),
    deliveries: [],
    held: [],
    faults: { ...DEFAULT_FAULTS },
    urls: consoleUrls(opts),
  };
}

/** Forget every order and delivery, restore faults and console settings. */
export function emptyState(s: SimState): void {
  s.orders = new Map();
  s.byMerchantOrderNo = new Map();
  s.deliveries = [];
  s.held = [];
  s.faults = { ...DEFAULT_FAULTS };
  s.urls = consoleUrls(s.opts);
}

/**
 * The merchant account `ref` names, or the first one when it names none.
 * @throws AppError REQUEST_INVALID (field `merchant`) when no account has that ref
 */
export function merchantOf(s: SimState, ref: string | undefined): SandboxMerchant {
  const merchant = ref === undefined ? s.merchants.values().next().value : s.merchants.get(ref);
  if (!merchant) {
    throw invalid(`no merchant account ${JSON.stringify(String(ref).slice(0, 40))} in the sandbox`, {
      field: 'merchant',
    });
  }
  return merchant;
}

/** The merchant account whose number is `merchantNo`, if any (how the platform API knows who asks). */
export function merchantByNo(s: SimState, merchantNo: string): SandboxMerchant | undefined {
  return [...s.merchants.values()].find((m) => m.merchantNo === merchantNo);
}

/** Index `order` under its merchant's own order number. */
export function indexOrder(s: SimState, order: SandboxOrder): void {
  let own = s.byMerchantOrderNo.get(order.merchant);
  if (!own) s.byMerchantOrderNo.set(order.merchant, (own = new Map()));
  own.set(order.merchantOrderNo, order);
}

/** The order of `merchant` (a ref) whose own number is `merchantOrderNo`. */
export function orderOfMerchant(s: SimState, merchant: string, merchantOrderNo: string): SandboxOrder | undefined {
  return s.byMerchantOrderNo.get(merchant)?.get(merchantOrderNo);
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

/**
 * The order `ref` names: a platform order number, else a merchant order number, of `merchant` (a ref) when given,
 * else of the first merchant account that has one.
 */
export function findOrder(s: SimState, ref: string, merchant?: string): SandboxOrder | undefined {
  const byPlatformNo = s.orders.get(ref);
  if (byPlatformNo && (merchant === undefined || byPlatformNo.merchant === merchant)) return byPlatformNo;
  if (merchant !== undefined) return orderOfMerchant(s, merchant, ref);
  for (const m of s.merchants.keys()) {
    const order = orderOfMerchant(s, m, ref);
    if (order) return order;
  }
  return undefined;
}

export function getOrder(s: SimState, ref: string, merchant?: string): SandboxOrder {
  if (merchant !== undefined) merchantOf(s, merchant);
  const o = findOrder(s, ref, merchant);
  if (!o) throw new AppError(ErrorCodes.NOT_FOUND, `no order ${ref}`, { details: { ref } });
  return o;
}

/** Where an order's callbacks go: its own URL, else its merchant's console default of its kind. */
export function urlFor(s: SimState, order: Pick<SandboxOrder, 'type' | 'callbackUrl' | 'merchant'>): string {
  const url = order.callbackUrl ?? s.urls.get(order.merchant)?.[order.type];
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
    merchant: order.merchant,
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
