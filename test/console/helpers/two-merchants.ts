/**
 * A two-merchant stack for the console's tests: the two-merchant console of apps/console/test/helpers/merchants-console.ts
 * (merchants `a` and `b`, each with its own fake platform) and a worker runner (runWorker) on the test's database and
 * Redis. Pay-ins are put in a merchant's queue as ingest stores them (`enqueuePayins`), with their
 * orders registered and released at that merchant's platform. `restartWorker()` closes the runner and starts a new
 * one. The caller closes it all with `close()`.
 */
import { loadConfig, type Config } from '@mcb/core/config';
import { ledgerEntries } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobId, callbackJobOptions } from '@mcb/core/queue';
import { createOrder, payinEvent, platformOrder, uid, type TestEnv } from '@mcb/testkit';
import { and, count, eq, gt } from 'drizzle-orm';
import {
  startMerchantsConsole,
  type MerchantsConsole,
  type MerchantsConsoleOptions,
} from '../../../apps/console/test/helpers/merchants-console.ts';
import { OPERATORS } from '../../../apps/console/test/helpers/operators.ts';
import { runWorker, type WorkerRunner } from '../../../apps/worker/src/index.ts';

export interface TwoMerchantsOptions extends MerchantsConsoleOptions {
  /** More settings of the worker (e.g. WORKER_CONCURRENCY). @defaultValue none */
  workerEnv?: Record<string, string>;
}

export interface TwoMerchants extends Omit<MerchantsConsole, 'close'> {
  /** The worker runner now (a new one after {@link TwoMerchants.restartWorker}). */
  worker(): WorkerRunner;
  /** Stop the worker runner and start a new one; `meanwhile`, when given, runs while none runs. */
  restartWorker(meanwhile?: () => Promise<void>): Promise<void>;
  /** `n` pay-ins of merchant `ref`, registered, released at its platform and put in its queue; their order numbers. */
  enqueuePayins(ref: 'a' | 'b', n: number): Promise<string[]>;
  /** Merchant `ref`'s credits (ledger entries), those after `since` only when given. */
  credits(ref: 'a' | 'b', since?: Date): Promise<number>;
  close(): Promise<void>;
}

const MERCHANT_NOS = { a: 'M-TWO-A-0001', b: 'M-TWO-B-0002' } as const;

/**
 * The stack: {@link startMerchantsConsole} (listening, with OPERATORS, merchants M-TWO-A-0001 and M-TWO-B-0002 and the
 * single-merchant indexes kept, unless the options say otherwise) and a worker runner.
 */
export async function startTwoMerchants(env: TestEnv, opts: TwoMerchantsOptions = {}): Promise<TwoMerchants> {
  const logger = createLogger({ name: 'two-merchants', level: 'silent' });
  const { workerEnv, ...consoleOpts } = opts;
  const stack = await startMerchantsConsole(env, {
    merchantNos: MERCHANT_NOS,
    operators: OPERATORS,
    listen: true,
    dropLegacyIndexes: false,
    ...consoleOpts,
  });
  const { merchants, queues } = stack;
  const workerConfig: Config = loadConfig(
    { ...stack.settings, WORKER_METRICS_PORT: '0', WORKER_CONCURRENCY: '4', ...workerEnv },
    'worker',
  );
  let worker = await runWorker({ config: workerConfig, logger });

  return {
    ...stack,
    worker: () => worker,
    async restartWorker(meanwhile) {
      await worker.stop();
      await meanwhile?.();
      worker = await runWorker({ config: workerConfig, logger });
    },
    async enqueuePayins(ref, n) {
      const merchantNo = merchants[ref].merchantNo;
      const nos: string[] = [];
      for (let i = 0; i < n; i++) {
        const merchantOrderNo = `${ref.toUpperCase()}-${uid()}`;
        await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '10', merchantNo });
        merchants[ref].platform.setOrder(
          platformOrder({
            orderNo: `P${merchantOrderNo}`,
            merchantNo,
            merchantOrderNo,
            type: 'payin',
            state: 6,
            amountJson: '10',
          }),
        );
        nos.push(merchantOrderNo);
      }
      await queues.of(ref).queue.addBulk(
        nos.map((no) => ({
          name: 'payin',
          data: { ...payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '10' }), merchantNo },
          opts: { ...callbackJobOptions, jobId: callbackJobId('payin', `P${no}`, 6) },
        })),
      );
      return nos;
    },
    async credits(ref, since) {
      const [row] = await env.db.db
        .select({ n: count() })
        .from(ledgerEntries)
        .where(
          and(
            eq(ledgerEntries.merchantNo, merchants[ref].merchantNo),
            since ? gt(ledgerEntries.createdAt, since) : undefined,
          ),
        );
      return row!.n;
    },
    async close() {
      await worker?.stop();
      await stack.close();
    },
  };
}
