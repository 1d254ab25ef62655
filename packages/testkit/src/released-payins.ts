import { orders } from '@mcb/core/db';
import type { CallbackJobInput } from '@mcb/core/queue';
import { payinEvent, platformOrder, uid } from './fixtures.ts';
import type { TestEnv } from './index.ts';
import type { FakePlatform } from './platform-double.ts';
import type { JobsOptions } from 'bullmq';

/**
 * `n` pay-ins of 10 PHP, registered with us and released at the platform double: the load of the flow-control
 * tests. Returns their merchant order numbers (`{tag}-{run}-{i}`).
 */
export async function releasedPayins(env: TestEnv, platform: FakePlatform, tag: string, n: number): Promise<string[]> {
  const run = uid();
  const nos = Array.from({ length: n }, (_, i) => `${tag}-${run}-${i}`);
  await env.db.db.insert(orders).values(
    nos.map((no) => ({
      merchantOrderNo: no,
      kind: 'payin' as const,
      amount: '10',
      currency: 'PHP',
      requestHash: `t-${no}`,
    })),
  );
  for (const no of nos)
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '10' }),
    );
  return nos;
}

/** Their callbacks' jobs as ingest stores them (the contract's job ids), for `queue.addBulk`. */
export function payinJobs(
  nos: readonly string[],
  opts: JobsOptions,
): { name: string; data: CallbackJobInput; opts: JobsOptions }[] {
  return nos.map((no) => ({
    name: 'payin',
    data: payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '10' }),
    opts: { ...opts, jobId: `payin-P${no}-6` },
  }));
}
