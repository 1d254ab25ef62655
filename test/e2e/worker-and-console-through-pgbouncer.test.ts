import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasPgBouncer, startOwnPgBouncer, useTestEnv, waitFor, type OwnPgBouncer } from '@mcb/testkit';
import { startPipeline, type Pipeline } from './helpers/pipeline.ts';

// Many worker processes would open hundreds of Postgres connections; merchants put PgBouncer in transaction
// pooling mode in front. The worker (group commit, look-ups, reviews) and the console hold no session state, use
// no named prepared statements and no session advisory lock, so the whole money path runs through it unchanged:
// here with 4 server connections behind 8 client connections (worker 6, console 2) and 64 jobs in flight.
const available = hasPgBouncer();

// Written reason: developer machines without Debian's pgbouncer package cannot run it; CI installs it.
describe.skipIf(!available && !process.env.CI)(
  'the worker and the console through PgBouncer (transaction pooling)',
  () => {
    const env = useTestEnv();
    let bouncer: OwnPgBouncer;
    let p: Pipeline;

    beforeAll(async () => {
      expect(available, 'pgbouncer is not installed (apt-get install pgbouncer)').toBe(true);
      bouncer = await startOwnPgBouncer(env.databaseUrl, { poolSize: 4 });
      p = await startPipeline(env, { databaseUrl: bouncer.urlFor(env.databaseUrl), concurrency: 64 });
    }, 60_000);
    afterAll(async () => {
      await p?.close();
      await bouncer?.destroy();
    });

    it('credits 60 pay-ins and settles 20 payouts once each, every callback sent twice', async () => {
      const payins = Array.from({ length: 60 }, (_, i) => `PGB-IN-${i}`);
      const payouts = Array.from({ length: 20 }, (_, i) => `PGB-OUT-${i}`);
      for (const no of payins) await p.registerPayin(no, '100.50');
      for (const no of payouts) await p.registerPayout(no, '20.00');
      for (const no of payins)
        p.sim.finalize(
          p.sim.createPayin({ merchantOrderNo: no, currency: 'INR', amount: '100.50', faults: { duplicate: 2 } })
            .orderNo,
          6,
        );
      payouts.forEach((no, i) =>
        p.sim.finalize(
          p.sim.createPayout({ merchantOrderNo: no, currency: 'INR', amount: '20.00', faults: { duplicate: 2 } })
            .orderNo,
          i % 2 ? 5 : 4,
        ),
      );

      await waitFor(
        async () => {
          const states = await Promise.all([...payins, ...payouts].map((no) => p.orderState(no)));
          return states.every((s) => s.status !== 'pending');
        },
        { timeoutMs: 60_000, intervalMs: 200, message: 'not every order settled through PgBouncer' },
      );
      for (const no of payins)
        expect((await p.orderState(no)).ledger).toEqual([{ entryType: 'payin_credit', amount: '100.5' }]);
      const outs = await Promise.all(payouts.map((no) => p.orderState(no)));
      expect(outs.map((s) => s.status)).toEqual(payouts.map((_, i) => (i % 2 ? 'refused' : 'succeeded')));
      expect(outs.map((s) => s.ledger.length)).toEqual(payouts.map((_, i) => (i % 2 ? 1 : 0)));
      const { rows } = await env.db.pool.query('select count(*)::int as n from callback_receipts');
      expect(rows[0].n).toBe(80);
      // The transactions did go through PgBouncer.
      expect(await bouncer.transactions(new URL(env.databaseUrl).pathname.slice(1))).toBeGreaterThan(80);
    }, 90_000);
  },
);
