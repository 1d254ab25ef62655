import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '@mcb/core/db';
import { callbackJobSchema } from '@mcb/core/queue';
import {
  createOrder,
  MERCHANT_NO,
  payinEvent,
  payoutEvent,
  platformOrder,
  startFakePlatform,
  uid,
  useTestEnv,
  type FakePlatform,
} from '@mcb/testkit';
import { commitEvent, findOrder } from '@mcb/settlement';
import { type Harness, orderState, startHarness } from '@mcb/testkit/worker';

// Migration 0007: the apps connect as a login role in the group role mcb_app, which can add to the audit
// (operator_actions), the ledger (ledger_entries) and the receipts (callback_receipts) and read them, but not change
// (beyond completing an audit intent once, as migration 0006 allows), delete or truncate them, nor disable their triggers (it does not own the tables). TRUNCATE is refused for every
// role, the owner included. This file makes such a login role, as docs/deployment.md tells an operator to, and runs
// a worker and the settlement commit as it.

const env = useTestEnv();
const role = `mcb_t_app_${randomBytes(4).toString('hex')}`;
const TRAIL = ['operator_actions', 'ledger_entries', 'callback_receipts'] as const;
let app: pg.Pool;
let appDb: Db;
let platform: FakePlatform;
let h: Harness;

function asRole(url: string, user: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = '';
  return u.toString();
}
/** The SQLSTATE a statement fails with, or 'ok'. */
async function codeOf(pool: pg.Pool, statement: string): Promise<string> {
  try {
    await pool.query(statement);
    return 'ok';
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
}

beforeAll(async () => {
  // As docs/deployment.md says (trust auth here, so no password).
  await env.db.pool.query(`create role ${role} login in role mcb_app`);
  const appUrl = asRole(env.databaseUrl, role);
  app = new pg.Pool({ connectionString: appUrl, max: 2 });
  app.on('error', () => {});
  appDb = createDb(appUrl, { max: 2 });
  platform = await startFakePlatform();
  h = await startHarness(env, platform.url, { workerDatabaseUrl: appUrl });
});
afterAll(async () => {
  await h?.close();
  await platform?.close();
  await appDb?.close();
  await app?.end();
  await env.db.pool.query(`drop role if exists ${role}`);
});

describe('the apps role (a member of mcb_app)', () => {
  it('is not the owner and no superuser: it is what the apps connect as', async () => {
    const { rows } = await app.query<{ usesuper: boolean; owner: string; member: boolean }>(
      `select (select rolsuper from pg_roles where rolname = current_user) as usesuper,
              (select tableowner from pg_tables where tablename = 'ledger_entries') as owner,
              pg_has_role(current_user, 'mcb_app', 'member') as member`,
    );
    expect(rows[0]).toMatchObject({ usesuper: false, member: true });
    expect(rows[0]!.owner).not.toBe(role);
  });

  it('runs the worker: a pay-in credited, its retry a duplicate, a payout refused and refunded, a mismatch reviewed', async () => {
    const pi = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: pi, kind: 'payin', amount: '40.00' });
    platform.setOrder(
      platformOrder({ orderNo: `P${pi}`, merchantOrderNo: pi, type: 'payin', state: 6, amountJson: '40' }),
    );
    const credited = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${pi}`, merchantOrderNo: pi, fiatAmount: '40' }))).id!,
    );
    expect(credited.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    const again = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${pi}`, merchantOrderNo: pi, fiatAmount: '40' }), `again-${pi}`)).id!,
    );
    expect(again.returnvalue).toEqual({ status: 'duplicate', reason: 'receipt-exists' });

    const po = `PO-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: po, kind: 'payout', amount: '12.50' });
    platform.setOrder(
      platformOrder({ orderNo: `P${po}`, merchantOrderNo: po, type: 'payout', state: 5, amountJson: '"12.50"' }),
    );
    const refused = await h.settled(
      (await h.add(payoutEvent({ orderNo: `P${po}`, merchantOrderNo: po, state: 5 }))).id!,
    );
    expect(refused.returnvalue).toMatchObject({ status: 'applied', outcome: 'refused' });

    const off = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: off, kind: 'payin', amount: '40.00' });
    platform.setOrder(
      platformOrder({ orderNo: `P${off}`, merchantOrderNo: off, type: 'payin', state: 6, amountJson: '39' }),
    );
    const review = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${off}`, merchantOrderNo: off, fiatAmount: '40' }))).id!,
    );
    expect(review.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_AMOUNT_MISMATCH' });

    const [a, b] = [await orderState(env.db.db, pi), await orderState(env.db.db, po)];
    expect(a.ledger.map((l) => [l.entryType, l.amount])).toEqual([['payin_credit', '40.00']]);
    expect(b.ledger.map((l) => [l.entryType, l.amount])).toEqual([['payout_refund', '12.50']]);
    expect(a.receipts).toHaveLength(1);
  });

  it('commits as the role when the order has already moved: the receipt it inserted is taken back in the same transaction', async () => {
    const no = `PO-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payout', amount: '30' });
    const stale = (await findOrder(appDb.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!; // read while pending, as a job does before Get order answers
    const event = (state: number) =>
      callbackJobSchema.parse(payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state }));
    const confirmed = (state: number) => ({
      orderNo: `P${no}`,
      merchantNo: event(state).merchantNo,
      merchantOrderNo: no,
      type: 'payout' as const,
      state,
      amount: '30',
      currency: 'PHP',
    });
    expect(
      await commitEvent(appDb.db, { event: event(4), order: stale, confirmed: confirmed(4), target: 'succeeded' }),
    ).toMatchObject({ status: 'applied' });
    // The other final state, decided against the stale order: its receipt is inserted, the order does not move, and
    // the commit deletes that receipt again (allowed: this transaction inserted it).
    const late = await commitEvent(appDb.db, {
      event: event(5),
      order: stale,
      confirmed: confirmed(5),
      target: 'refused',
    });
    expect(late.status).toBe('conflict');
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('succeeded');
    expect(s.receipts.map((r) => r.state)).toEqual([4]);
  });

  it('adds to the audit and reads the trail, but cannot update, delete or truncate any of it, nor disable a trigger', async () => {
    expect(
      await codeOf(
        app,
        `insert into operator_actions (operator, role, action, target, reason, outcome) values ('ops', 'admin', 'reviews.dismiss', 'review:1', 'test', 'applied')`,
      ),
    ).toBe('ok');
    for (const table of TRAIL) {
      const { rows } = await app.query<{ n: number }>(`select count(*)::int as n from ${table}`);
      expect(rows[0]!.n, table).toBeGreaterThan(0);
      expect({ table, update: await codeOf(app, `update ${table} set id = id`) }).toEqual({ table, update: '42501' });
      // callback_receipts grants DELETE for the commit's take-back; its trigger refuses any receipt another transaction inserted.
      expect({ table, delete: await codeOf(app, `delete from ${table}`) }).toEqual({
        table,
        delete: table === 'callback_receipts' ? '23001' : '42501',
      });
      expect({ table, truncate: await codeOf(app, `truncate ${table} cascade`) }).toEqual({ table, truncate: '42501' });
      expect({ table, disable: await codeOf(app, `alter table ${table} disable trigger all`) }).toEqual({
        table,
        disable: '42501',
      });
      expect({ table, drop: await codeOf(app, `drop table ${table} cascade`) }).toEqual({ table, drop: '42501' });
      const { rows: left } = await app.query<{ n: number }>(`select count(*)::int as n from ${table}`);
      expect(left[0]!.n, table).toBe(rows[0]!.n);
    }
    expect(await codeOf(app, `alter table ledger_entries disable trigger ledger_entries_append_only`)).toBe('42501');
    // The audit's one allowed change: the console completes an intent (outcome 'pending') once. Only outcome and
    // details may be named in an UPDATE, and the trigger refuses it for a row that is not pending.
    expect(await codeOf(app, `update operator_actions set reason = 'rewritten'`)).toBe('42501');
    expect(await codeOf(app, `update operator_actions set outcome = 'rewritten'`)).toBe('23001');
    const { rows: intent } = await app.query<{ id: string }>(
      `insert into operator_actions (operator, role, action, target, reason, outcome) values ('ops', 'admin', 'reviews.reverify', 'review:2', 'test', 'pending') returning id`,
    );
    expect(await codeOf(app, `update operator_actions set outcome = 'applied' where id = ${intent[0]!.id}`)).toBe('ok');
    expect(await codeOf(app, `update operator_actions set outcome = 'failed' where id = ${intent[0]!.id}`)).toBe(
      '23001',
    );
    // The replica role skips triggers; only a superuser may take it.
    expect(await codeOf(app, `set session_replication_role = replica`)).toBe('42501');
  });

  it('TRUNCATE of the trail is refused for every role, the owner and superuser included (directly or by cascade)', async () => {
    for (const table of TRAIL)
      expect({ table, code: await codeOf(env.db.pool, `truncate ${table} cascade`) }).toEqual({ table, code: '23001' });
    expect(await codeOf(env.db.pool, 'truncate orders cascade')).toBe('23001');
    const { rows } = await env.db.pool.query<{ n: number }>('select count(*)::int as n from ledger_entries');
    expect(rows[0]!.n).toBeGreaterThan(0);
  });

  it("a row's merchant never changes, for the apps' role and the owner alike (migration 0016), while its other columns do", async () => {
    const id = await createOrder(appDb.db, { merchantOrderNo: `MV-${uid()}`, kind: 'payin', amount: '5.00' });
    for (const pool of [app, env.db.pool])
      expect(await codeOf(pool, `update orders set merchant_no = 'M-OTHER' where id = ${id}`)).toBe('23001');
    expect(await codeOf(app, `update orders set merchant_no = merchant_no, updated_at = now() where id = ${id}`)).toBe(
      'ok',
    );
    const { rows } = await env.db.pool.query<{ merchant_no: string }>(
      `select merchant_no from orders where id = ${id}`,
    );
    expect(rows[0]!.merchant_no).toBe(MERCHANT_NO);
    // The earlier tests left a review and arrivals; the owner (the apps' role may not even name reviews.merchant_no).
    for (const table of ['reviews', 'callback_arrivals']) {
      const { rowCount } = await env.db.pool.query(`select 1 from ${table} limit 1`);
      expect({ table, rowCount }).not.toEqual({ table, rowCount: 0 });
      expect({ table, code: await codeOf(env.db.pool, `update ${table} set merchant_no = 'M-OTHER'`) }).toEqual({
        table,
        code: '23001',
      });
    }
  });

  it('every table and sequence of the schema is granted to mcb_app (a new table without grants would break the apps)', async () => {
    const { rows } = await env.db.pool.query<{ name: string; ok: boolean }>(
      `select c.relname as name,
              case c.relkind when 'S' then has_sequence_privilege('mcb_app', c.oid, 'USAGE')
                             else has_table_privilege('mcb_app', c.oid, 'SELECT, INSERT') end as ok
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'public' and c.relkind in ('r', 'p', 'S')`,
    );
    expect(rows.length).toBeGreaterThan(10);
    expect(rows.filter((r) => !r.ok).map((r) => r.name)).toEqual([]);
  });
});
