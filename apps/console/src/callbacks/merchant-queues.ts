/**
 * The console's callbacks queues, one per merchant (`merchantKeys`: `default` keeps `callbacks` under QUEUE_PREFIX,
 * another merchant `callbacks-{ref}` under its own hash-tagged prefix). A job id (`payin-{OrderNo}-{state}`) is unique
 * within one merchant's queue only, so whatever acts on a job (a replay, run-now, the order's timeline) names the
 * merchant first and reaches that merchant's queue through {@link MerchantQueues.of}.
 */
import type { Merchant } from '@mcb/core/config';
import { pickByRef } from '../web/route-deps.ts';
import { merchantKeys } from '@mcb/core/queue';
import type { Queue } from 'bullmq';

/** One merchant's callbacks queue, as the console reaches it. */
export interface MerchantQueue {
  readonly ref: string;
  readonly merchantNo: string;
  readonly queue: Queue;
  /** The worker's unknown-order set of this merchant (WORKER_MAX_UNKNOWN_WAITING): the dry run's cap preview. */
  readonly unknownOrderWaiting: string;
}

/** Every merchant's callbacks queue, in config order. */
export interface MerchantQueues {
  readonly list: readonly MerchantQueue[];
  /** Two merchants or more: requests name one (`merchant`), and lists show a merchant column. */
  readonly several: boolean;
  /**
   * The queue of merchant `ref`; with one merchant, `ref` may be left out. 400 REQUEST_INVALID naming `field` for an
   * unknown ref, or for none when there are several.
   */
  of(ref: string | undefined, field?: string): MerchantQueue;
  /** The queue of the merchant with this number, if the console serves it. */
  byMerchantNo(merchantNo: string): MerchantQueue | undefined;
}

/** The queues of `merchants`, each opened by `open` with its name and prefix (the caller closes them). */
export function merchantQueues(
  merchants: readonly Pick<Merchant, 'ref' | 'merchantNo'>[],
  queuePrefix: string,
  open: (name: string, prefix: string) => Queue,
): MerchantQueues {
  return fromList(
    merchants.map((m) => {
      const keys = merchantKeys(queuePrefix, m.ref);
      return {
        ref: m.ref,
        merchantNo: m.merchantNo,
        queue: open(keys.callbacksQueue, keys.prefix),
        unknownOrderWaiting: keys.unknownOrderWaiting,
      };
    }),
  );
}

/**
 * One queue given as it is (a test's, or main's of a single merchant): it is the first merchant's, and its keys are
 * named under its own prefix.
 */
export function singleMerchantQueue(queue: Queue, merchant: Pick<Merchant, 'ref' | 'merchantNo'>): MerchantQueues {
  const keys = merchantKeys(queue.opts.prefix ?? 'bull', merchant.ref);
  return fromList([
    { ref: merchant.ref, merchantNo: merchant.merchantNo, queue, unknownOrderWaiting: keys.unknownOrderWaiting },
  ]);
}

function fromList(list: MerchantQueue[]): MerchantQueues {
  return {
    list,
    several: list.length > 1,
    of: (ref, field) => pickByRef(list, (m) => m.ref, ref, field),
    byMerchantNo: (merchantNo) => list.find((m) => m.merchantNo === merchantNo),
  };
}
