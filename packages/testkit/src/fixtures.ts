import { randomBytes } from 'node:crypto';
import { orders, type Database } from '@mcb/core/db';
import type { CallbackJobInput } from '@mcb/core/queue';
import type { FakeOrder } from './platform-double.ts';

/** Test data: our orders and the callbacks and Get order answers about them. */

export const MERCHANT_NO = 'M100200';

/** A unique suffix so tests in one file never share order numbers. */
export function uid(): string {
  return randomBytes(4).toString('hex');
}

/** Register one of our own orders (as the console would), for {@link MERCHANT_NO} unless told another merchant. */
export async function createOrder(
  db: Database,
  o: { merchantOrderNo: string; kind: 'payin' | 'payout'; amount: string; currency?: string; merchantNo?: string },
): Promise<number> {
  const [row] = await db
    .insert(orders)
    .values({
      merchantNo: o.merchantNo ?? MERCHANT_NO,
      merchantOrderNo: o.merchantOrderNo,
      kind: o.kind,
      amount: o.amount,
      currency: o.currency ?? 'PHP',
      requestHash: `test-${o.merchantOrderNo}`,
    })
    .returning({ id: orders.id });
  return row!.id;
}

export function payinEvent(o: {
  orderNo: string;
  merchantOrderNo: string;
  fiatAmount: string;
  state?: number;
  receivedAt?: string;
}): CallbackJobInput {
  return {
    kind: 'payin',
    orderNo: o.orderNo,
    merchantNo: MERCHANT_NO,
    merchantOrderNo: o.merchantOrderNo,
    state: o.state ?? 6,
    payTime: '2025-01-02T03:04:05.000Z',
    quantity: '17.3',
    fiatAmount: o.fiatAmount,
    receivedAt: o.receivedAt ?? new Date().toISOString(),
    source: 'callback',
  };
}

export function payoutEvent(o: {
  orderNo: string;
  merchantOrderNo: string;
  state: number;
  receivedAt?: string;
}): CallbackJobInput {
  return {
    kind: 'payout',
    orderNo: o.orderNo,
    merchantNo: MERCHANT_NO,
    merchantOrderNo: o.merchantOrderNo,
    state: o.state,
    payTime: null,
    receivedAt: o.receivedAt ?? new Date().toISOString(),
    source: 'callback',
  };
}

export function platformOrder(
  o: Partial<FakeOrder> & Pick<FakeOrder, 'orderNo' | 'merchantOrderNo' | 'type' | 'state' | 'amountJson'>,
): FakeOrder {
  return { merchantNo: MERCHANT_NO, currency: 'PHP', ...o };
}
