import { createDb, type Db } from '@mcb/core/db';
import { callbackJobSchema } from '@mcb/core/queue';
import { classifyError, commitEvent, commitStarted, commitWaits, findOrder, type CommitInput } from '@mcb/settlement';
import { createOrder, MERCHANT_NO, payinEvent, uid, useTestEnv } from '@mcb/testkit';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';

// What a demoted primary does to the money path: every write is answered 25006 (read-only transaction). That is
// transient (the job retries), and the connection that answered it is closed, not pooled: a session that began
// while the database was read-only keeps that default for its whole life, as a pooled connection to a demoted
// primary keeps reaching it, so only a new connection reaches a writable server. The database made read-only here
// is this file's own clone (ALTER DATABASE), never the shared server.
const env = useTestEnv();
/** Each test's own pool of one connection (so which session it holds is known), closed after it. */
let db: Db;
let name: string;

beforeAll(() => {
  name = new URL(env.databaseUrl).pathname.slice(1);
});
beforeEach(() => {
  db = createDb(env.databaseUrl, { max: 1, applicationName: 'mcb-read-only-test' });
});
afterEach(async () => {
  await db.close();
  await env.db.pool.query(`ALTER DATABASE "${name}" RESET default_transaction_read_only`);
});

async function payin(): Promise<CommitInput> {
  const no = `RO-${uid()}`;
  await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '10' });
  const order = (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!;
  const event = callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '10' }));
  const confirmed = {
    orderNo: `P${no}`,
    merchantNo: MERCHANT_NO,
    merchantOrderNo: no,
    type: 'payin' as const,
    state: 6,
    amount: '10',
    currency: 'PHP',
  };
  return { event, order, confirmed, target: 'credited' };
}

const backendPid = async () => (await db.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
const credits = async (input: CommitInput) =>
  (
    await env.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger_entries WHERE order_id = $1', [
      input.order.id,
    ])
  ).rows[0]!.n;

describe('a read-only database', () => {
  it('fails the commit transiently (25006), closes that connection, and the next attempt commits on a new one', async () => {
    const input = await payin();
    // 1. The database turns read-only; the pool's one connection opens now, read-only for its life.
    await env.db.pool.query(`ALTER DATABASE "${name}" SET default_transaction_read_only = on`);
    const err = await commitEvent(db.db, input).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as { code?: string }).code).toBe('25006');
    expect(classifyError(err)).toBe('transient');
    expect(await credits(input)).toBe(0);

    // 2. Writable again. The read-only session was discarded: the retry runs on a new backend, and commits once.
    await env.db.pool.query(`ALTER DATABASE "${name}" RESET default_transaction_read_only`);
    const result = await commitEvent(db.db, input);
    expect(result.status).toBe('applied');
    expect(await credits(input)).toBe(1);
    // A healthy connection is kept: the next statements run on the same backend.
    const pid = await backendPid();
    expect((await commitEvent(db.db, input)).status).toBe('duplicate');
    expect(await backendPid()).toBe(pid);
  });

  it('a connection kept from the read-only period would have failed again: inTransaction is what lets it go', async () => {
    const input = await payin();
    await env.db.pool.query(`ALTER DATABASE "${name}" SET default_transaction_read_only = on`);
    const held = await db.pool.connect(); // opened read-only
    const pid = (await held.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    held.release(); // back to the pool, idle
    await env.db.pool.query(`ALTER DATABASE "${name}" RESET default_transaction_read_only`);
    // The pool hands out the read-only session: this attempt fails, and must not leave it in the pool.
    await expect(commitEvent(db.db, input)).rejects.toMatchObject({ code: '25006' });
    expect(await backendPid()).not.toBe(pid);
    expect((await commitEvent(db.db, input)).status).toBe('applied');
    expect(await credits(input)).toBe(1);
  });
});

describe('commitWaits', () => {
  it('counts the COMMITs in flight longer than the threshold, and the oldest wait, per pool', () => {
    let now = 1_000_000;
    const clock = () => now;
    const done1 = commitStarted(db.pool, clock);
    now += 3000;
    const done2 = commitStarted(db.pool, clock);
    now += 4000;
    expect(commitWaits(db.pool, 5000, now)).toEqual({ stalled: 1, oldestMs: 7000 });
    expect(commitWaits(env.db.pool, 5000, now)).toEqual({ stalled: 0, oldestMs: 0 });
    now += 2000;
    expect(commitWaits(db.pool, 5000, now)).toEqual({ stalled: 2, oldestMs: 9000 });
    done1();
    done2();
    expect(commitWaits(db.pool, 5000, now)).toEqual({ stalled: 0, oldestMs: 0 });
  });
});
