import { createDb } from '@mcb/core/db';
import { callbackJobSchema } from '@mcb/core/queue';
import { commitEvents, findOrder, type CommitInput, type CommitOptions } from '@mcb/settlement';
import { createOrder, MERCHANT_NO, payinEvent, uid, useTestEnv } from '@mcb/testkit';
import pg from 'pg';
import { describe, expect, it } from 'vitest';

const env = useTestEnv();

async function payins(n: number): Promise<CommitInput[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const no = `PI-${uid()}`;
      await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '8' });
      const order = (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!;
      return {
        event: callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '8' })),
        order,
        confirmed: {
          orderNo: `P${no}`,
          merchantNo: MERCHANT_NO,
          merchantOrderNo: no,
          type: 'payin' as const,
          state: 6,
          amount: '8',
          currency: 'PHP',
        },
        target: 'credited' as const,
      };
    }),
  );
}

/** Ledger entries and receipts of the inputs' orders, and how many transactions wrote the receipts. */
async function stored(inputs: readonly CommitInput[]) {
  const ids = inputs.map((x) => x.order.id);
  const { rows: ledger } = await env.db.pool.query<{ order_id: string }>(
    'SELECT order_id FROM ledger_entries WHERE order_id = ANY($1)',
    [ids],
  );
  const { rows: receipts } = await env.db.pool.query<{ xmin: string }>(
    'SELECT xmin::text FROM callback_receipts WHERE order_id = ANY($1)',
    [ids],
  );
  return { ledger: ledger.length, receipts: receipts.length, transactions: new Set(receipts.map((r) => r.xmin)).size };
}

/**
 * 8 events, one of whose orders another connection holds FOR UPDATE: the 7 others commit (in one transaction), the
 * held one fails with the timeout (transient: its job retries) and commits once the row is released.
 */
async function holdOneAndCommit(db: Parameters<typeof commitEvents>[0], options: CommitOptions, expectedCode: string) {
  const inputs = await payins(8);
  const stuck = inputs[3]!;
  const holder = new pg.Client({ connectionString: env.databaseUrl });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM orders WHERE id = $1 FOR UPDATE', [stuck.order.id]);
    const results = await commitEvents(db, inputs, options);
    expect(results.filter((r) => r.ok && r.value.status === 'applied')).toHaveLength(7);
    const failed = results[3]!;
    expect(failed.ok).toBe(false);
    expect(!failed.ok && (failed.error as { code?: string }).code).toBe(expectedCode);
    const others = inputs.filter((x) => x !== stuck);
    expect(await stored(others)).toEqual({ ledger: 7, receipts: 7, transactions: 1 });
    expect(await stored([stuck])).toMatchObject({ ledger: 0, receipts: 0 });
  } finally {
    await holder.query('ROLLBACK').catch(() => {});
    await holder.end();
  }
  // The row is released: the held event's retry commits it; the whole batch again credits nothing twice.
  const retried = await commitEvents(db, [stuck], options);
  expect(retried[0]).toMatchObject({ ok: true, value: { status: 'applied' } });
  const again = await commitEvents(db, inputs, options);
  expect(again.every((r) => r.ok && r.value.status === 'duplicate')).toBe(true);
  expect(await stored(inputs)).toMatchObject({ ledger: 8, receipts: 8 });
}

describe('one order locked elsewhere', () => {
  it('fails only its own event on the lock timeout (55P03); the 7 others commit together', async () => {
    await holdOneAndCommit(env.db.db, { lockTimeoutMs: 300 }, '55P03');
  });

  it('does the same when the wait ends on the statement timeout (57014) instead', async () => {
    const short = createDb(env.databaseUrl, { max: 2, statementTimeoutMs: 400 });
    try {
      await holdOneAndCommit(short.db, { lockTimeoutMs: 0 }, '57014');
    } finally {
      await short.close();
    }
  });

  it('fails every event alike (for a later retry) when it timed out with no row held: load, not one stuck row', async () => {
    const short = createDb(env.databaseUrl, { max: 2, statementTimeoutMs: 1 });
    try {
      const inputs = await payins(3);
      const results = await commitEvents(short.db, inputs, { lockTimeoutMs: 0 });
      // A 1 ms statement timeout: the batch times out (57014) with no row held, or now and then finishes in time;
      // either way all of it alike, never split into one transaction per event.
      expect(new Set(results.map((r) => r.ok)).size).toBe(1);
      for (const r of results) if (!r.ok) expect((r.error as { code?: string }).code).toBe('57014');
    } finally {
      await short.close();
    }
  });
});
