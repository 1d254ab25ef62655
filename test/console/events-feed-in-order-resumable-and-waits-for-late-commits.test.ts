import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orderEvents, orders } from '@mcb/core/db';
import { useTestEnv, waitFor } from '@mcb/testkit';
import pg from 'pg';
import { startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let orderId: number;
const GRACE_MS = 1500;

beforeAll(async () => {
  stack = await startOpsStack(env, { consoleDeps: { eventsGapGraceMs: GRACE_MS } });
  const [row] = await env.db.db
    .insert(orders)
    .values({ merchantOrderNo: 'EV-1', kind: 'payin', currency: 'PHP', amount: '1', requestHash: 'h' })
    .returning();
  orderId = row!.id;
});
afterAll(async () => {
  await stack?.close();
});

type Page = { events: { id: string; type: string; payload: Record<string, unknown> }[]; nextCursor: string };
const page = async (after?: string, limit?: number): Promise<Page> => {
  const qs = new URLSearchParams({ ...(after ? { after } : {}), ...(limit ? { limit: String(limit) } : {}) });
  const res = await stack.app.inject({
    method: 'GET',
    url: `/api/events?${qs}`,
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Page;
};
const insertEvent = (n: number) =>
  env.db.db
    .insert(orderEvents)
    .values({ orderId, merchantOrderNo: 'EV-1', eventType: 'payin.credited', payload: { n } })
    .returning({ id: orderEvents.id });

describe('GET /api/events', () => {
  it('returns events in id order and resumes from nextCursor without repeats', async () => {
    for (let n = 1; n <= 5; n++) await insertEvent(n);
    const first = await page(undefined, 2);
    const second = await page(first.nextCursor, 2);
    const third = await page(second.nextCursor, 10);
    const seen = [...first.events, ...second.events, ...third.events].map((e) => e.payload.n);
    expect(seen).toEqual([1, 2, 3, 4, 5]);
    expect(await page(third.nextCursor)).toEqual({ events: [], nextCursor: third.nextCursor });
    expect(
      (
        await stack.app.inject({
          method: 'GET',
          url: '/api/events?after=-1',
          headers: { authorization: `Bearer ${TOKEN}` },
        })
      ).statusCode,
    ).toBe(400);
  });

  it('does not step over an event whose transaction commits late; it is delivered in order once committed', async () => {
    const start = (await page()).nextCursor;
    // 1. A transaction takes the next id and stays open.
    const client = new pg.Client({ connectionString: env.databaseUrl });
    await client.connect();
    try {
      await client.query('begin');
      await client.query(
        `insert into order_events (order_id, merchant_order_no, event_type, payload) values ($1, 'EV-1', 'payin.credited', '{"n":"late"}')`,
        [orderId],
      );
      // 2. A later event commits first.
      await insertEvent(99);
      // 3. The feed stops before the hole: the committed later event is held back, the cursor does not move past it.
      const held = await page(start);
      expect(held.events).toEqual([]);
      expect(held.nextCursor).toBe(start);
      // 4. Commit: both arrive, in id order.
      await client.query('commit');
    } finally {
      await client.end();
    }
    const after = await page(start);
    expect(after.events.map((e) => e.payload.n)).toEqual(['late', 99]);
  });

  it('steps over a hole left by a rolled-back transaction once the grace period has passed', async () => {
    const start = (await page()).nextCursor;
    const client = new pg.Client({ connectionString: env.databaseUrl });
    await client.connect();
    try {
      await client.query('begin');
      await client.query(
        `insert into order_events (order_id, merchant_order_no, event_type, payload) values ($1, 'EV-1', 'payin.credited', '{"n":"never"}')`,
        [orderId],
      );
      await client.query('rollback');
    } finally {
      await client.end();
    }
    await insertEvent(100);
    expect((await page(start)).events).toEqual([]);
    const later = await waitFor(
      async () => {
        const p = await page(start);
        return p.events.length ? p : undefined;
      },
      { timeoutMs: 5000, intervalMs: 100 },
    );
    expect(later.events.map((e) => e.payload.n)).toEqual([100]);
  });
});
