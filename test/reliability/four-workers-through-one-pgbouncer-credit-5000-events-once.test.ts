import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { orders } from '@mcb/core/db';
import { callbackJobId, callbackJobOptions, CALLBACKS_QUEUE, type CallbackJobInput } from '@mcb/core/queue';
import {
  hasPgBouncer,
  payinEvent,
  payoutEvent,
  platformOrder,
  startFakePlatform,
  startOwnPgBouncer,
  uid,
  useTestEnv,
  waitFor,
  MERCHANT_NO,
} from '@mcb/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { startNodeProcess, type NodeProcess } from './helpers/node-process.ts';

// Many workers, one small Postgres pool: four worker processes (256 jobs in flight and 8 client connections each,
// plus their maintenance workers) share one PgBouncer in transaction pooling mode with 10 server connections, and
// credit 5,000 events exactly once. The queue is filled as ingest fills it (one job per callback id; every event is
// added twice, as duplicate deliveries are).
const available = hasPgBouncer();
const WORKERS = 4;
const PAYINS = 4000;
const PAYOUTS = 1000;
const POOL = 10;

// Written reason: developer machines without Debian's pgbouncer package cannot run it; CI installs it.
describe.skipIf(!available && !process.env.CI)(
  `${WORKERS} worker processes through one PgBouncer (pool of ${POOL})`,
  () => {
    const env = useTestEnv();

    it(`credit ${PAYINS + PAYOUTS} events once each`, async () => {
      expect(available, 'pgbouncer is not installed (apt-get install pgbouncer)').toBe(true);
      const closers: (() => Promise<unknown>)[] = [];
      const logDir = mkdtempSync(join(tmpdir(), 'mcb-4workers-logs-'));
      const exits: string[] = [];
      let closing = false;
      try {
        const bouncer = await startOwnPgBouncer(env.databaseUrl, { poolSize: POOL });
        closers.push(() => bouncer.destroy());
        const platform = await startFakePlatform();
        closers.push(() => platform.close());

        // 1. Our orders, the platform's final answers, and one job per event in the queue (each added twice).
        const run = uid();
        const events: CallbackJobInput[] = [];
        const rows: (typeof orders.$inferInsert)[] = [];
        for (let i = 0; i < PAYINS + PAYOUTS; i++) {
          const payin = i < PAYINS;
          const merchantOrderNo = `W4-${run}-${i}`;
          const orderNo = `P${merchantOrderNo}`;
          const state = payin ? 6 : i % 2 ? 5 : 4;
          rows.push({
            merchantOrderNo,
            kind: payin ? 'payin' : 'payout',
            amount: '40.25',
            currency: 'PHP',
            requestHash: `t-${merchantOrderNo}`,
          });
          platform.setOrder(
            platformOrder({ orderNo, merchantOrderNo, type: payin ? 'payin' : 'payout', state, amountJson: '"40.25"' }),
          );
          events.push(
            payin
              ? payinEvent({ orderNo, merchantOrderNo, fiatAmount: '40.25' })
              : payoutEvent({ orderNo, merchantOrderNo, state }),
          );
        }
        for (let i = 0; i < rows.length; i += 1000) await env.db.db.insert(orders).values(rows.slice(i, i + 1000));
        const producer = new Redis(env.redisUrl, { maxRetriesPerRequest: 1 });
        closers.push(async () => producer.disconnect());
        const queue = new Queue<CallbackJobInput>(CALLBACKS_QUEUE, { connection: producer, prefix: env.prefix });
        closers.push(() => queue.close());
        const jobs = events.map((e) => ({
          name: e.kind,
          data: e,
          opts: { ...callbackJobOptions, jobId: callbackJobId(e.kind, e.orderNo, e.state) },
        }));
        for (let i = 0; i < jobs.length; i += 500) await queue.addBulk(jobs.slice(i, i + 500));
        for (let i = 0; i < jobs.length; i += 500) await queue.addBulk(jobs.slice(i, i + 500)); // duplicates: no-ops

        // 2. Four worker processes, every Postgres connection through PgBouncer.
        const databaseUrl = bouncer.urlFor(env.databaseUrl);
        const workers: NodeProcess[] = [];
        for (let w = 0; w < WORKERS; w++) {
          const p = startNodeProcess(
            `worker-${w}`,
            'apps/worker/src/main.ts',
            {
              MERCHANT_NO,
              REDIS_URL: env.redisUrl,
              QUEUE_PREFIX: env.prefix,
              DATABASE_URL: databaseUrl,
              PLATFORM_BASE_URL: platform.url,
              PLATFORM_ALLOW_HTTP: 'true',
              WORKER_METRICS_PORT: '0',
              LOG_LEVEL: 'info',
            },
            join(logDir, `worker-${w}.log`),
          );
          void p.exited.then(({ code, signal }) => {
            if (!closing) exits.push(`${p.name} exited: ${code ?? signal}`);
          });
          closers.push(() => p.stop(5000));
          workers.push(p);
        }
        await Promise.all(workers.map((w) => w.waitForOutput(/worker started/, 30_000)));

        // 3. Drain, watching PgBouncer: never more than POOL server connections, while more clients share them.
        const database = new URL(env.databaseUrl).pathname.slice(1);
        let maxServers = 0;
        let maxClients = 0;
        const started = Date.now();
        await waitFor(
          async () => {
            const c = await bouncer.connections(database);
            maxServers = Math.max(maxServers, c.servers);
            maxClients = Math.max(maxClients, c.clients);
            const { rows: r } = await env.db.pool.query<{ n: number }>(
              'select count(*)::int as n from callback_receipts',
            );
            return r[0]!.n === PAYINS + PAYOUTS;
          },
          { timeoutMs: 240_000, intervalMs: 200, message: `not every event was settled (logs: ${logDir})` },
        );
        const seconds = (Date.now() - started) / 1000;

        // 4. Once each: one receipt per event, one credit per pay-in, one refund per refused payout, nothing twice.
        const q = async (sql: string) => (await env.db.pool.query<{ n: number }>(sql)).rows[0]!.n;
        expect(await q("select count(*)::int as n from ledger_entries where entry_type = 'payin_credit'")).toBe(PAYINS);
        expect(await q("select count(*)::int as n from ledger_entries where entry_type = 'payout_refund'")).toBe(
          PAYOUTS / 2,
        );
        expect(
          await q(
            'select count(*)::int as n from (select order_id from ledger_entries group by order_id having count(*) > 1) d',
          ),
        ).toBe(0);
        expect(await q("select count(*)::int as n from orders where status = 'pending'")).toBe(0);
        expect(await q('select count(*)::int as n from reviews')).toBe(0);
        expect(maxServers).toBeLessThanOrEqual(POOL);
        expect(await bouncer.transactions(database)).toBeGreaterThan(0);
        expect(exits).toEqual([]);
        console.log(
          `${WORKERS} workers through PgBouncer: ${PAYINS + PAYOUTS} events settled once each in ${seconds.toFixed(1)} s ` +
            `(${((PAYINS + PAYOUTS) / seconds).toFixed(0)}/s); at most ${maxServers} server connections for up to ${maxClients} clients`,
        );
        closing = true;
        rmSync(logDir, { recursive: true, force: true });
      } finally {
        closing = true;
        for (const c of closers.reverse()) await c().catch(() => undefined);
      }
    }, 300_000);
  },
);
