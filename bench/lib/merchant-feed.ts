/**
 * The fairness bench's callbacks, put on a merchant's queue as ingest enqueues them (the contract's job ids and
 * options, `receivedAt` the moment of sending): a flood all at once, or a steady rate. Each callback's send time is
 * kept, for callback-to-credit (`callback_receipts.applied_at` minus it).
 */
import { merchantKeys, callbackJobId, callbackJobOptions, type CallbackJobInput } from '@mcb/core/queue';
import { PayinState } from '@mcb/core/spec';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { sleep } from './progress.ts';

/** A merchant of the bench: its ref, number, and the prefix of its merchant order numbers. */
export interface BenchMerchant {
  ref: string;
  merchantNo: string;
  /** Its orders are `${orderPrefix}${i}`, their platform numbers `P${orderPrefix}${i}`. */
  orderPrefix: string;
}

export const BENCH_AMOUNT = '100.00';

/** The callback of pay-in `i` of `m`, as ingest makes the job (sent at `sentAt`). */
export function payinJob(m: BenchMerchant, i: number, sentAt: number) {
  const merchantOrderNo = `${m.orderPrefix}${i}`;
  const receivedAt = new Date(sentAt).toISOString();
  const data: CallbackJobInput = {
    kind: 'payin',
    orderNo: `P${merchantOrderNo}`,
    merchantNo: m.merchantNo,
    merchantOrderNo,
    state: PayinState.Released,
    payTime: receivedAt,
    quantity: '1.5',
    fiatAmount: BENCH_AMOUNT,
    receivedAt,
    source: 'callback',
  };
  return {
    name: 'payin' as const,
    data,
    opts: { ...callbackJobOptions, jobId: callbackJobId('payin', data.orderNo, PayinState.Released) },
  };
}

/** Where a merchant's callbacks go, and when each was first sent (by platform order number). */
export interface MerchantFeed {
  merchant: BenchMerchant;
  sentAt: Map<string, number>;
  /** Every pay-in of 1..`count` at once (in bulks of 1,000), then 10 % of them again (duplicates: the same job ids). */
  flood(count: number): Promise<void>;
  /** Pay-ins `from`, `from + 1`, … at `perSecond` until `stop()`; resolves to how many were sent. */
  steady(perSecond: number, from?: number): { stop(): Promise<number> };
  close(): Promise<void>;
}

/** `merchant`'s feed onto its own queue (`single`: the `default` merchant's, as one deployment of today has). */
export function merchantFeed(
  connection: Redis,
  merchant: BenchMerchant,
  queuePrefix: string,
  single = false,
): MerchantFeed {
  const keys = merchantKeys(queuePrefix, single ? undefined : merchant.ref);
  const queue = new Queue(keys.callbacksQueue, { connection, prefix: keys.prefix });
  const sentAt = new Map<string, number>();
  const send = async (indexes: number[]) => {
    const now = Date.now();
    const jobs = indexes.map((i) => payinJob(merchant, i, now));
    for (const j of jobs) if (!sentAt.has(j.data.orderNo)) sentAt.set(j.data.orderNo, now);
    await queue.addBulk(jobs);
  };
  return {
    merchant,
    sentAt,
    async flood(count) {
      for (let from = 1; from <= count; from += 1000)
        await send(Array.from({ length: Math.min(1000, count - from + 1) }, (_, k) => from + k));
      const again = Array.from({ length: Math.floor(count / 10) }, (_, k) => 1 + k * 10);
      for (let k = 0; k < again.length; k += 1000) await send(again.slice(k, k + 1000));
    },
    steady(perSecond, from = 1) {
      let running = true;
      const t0 = performance.now();
      const loop = (async () => {
        let i = 0;
        while (running) {
          const due = t0 + (i * 1000) / perSecond;
          const wait = due - performance.now();
          if (wait > 0) await sleep(wait);
          if (!running) break;
          await send([from + i]);
          i++;
        }
        return i;
      })();
      return {
        async stop() {
          running = false;
          return loop;
        },
      };
    },
    close: () => queue.close(),
  };
}
