import { ledgerEntries } from '@mcb/core/db';
import { createOrder, MERCHANT_NO, payinEvent, uid, useTestEnv } from '@mcb/testkit';
import { eq, sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { callbackJobSchema } from '@mcb/core/queue';
import { commitEvent } from '@mcb/settlement';
import { findOrder } from '@mcb/settlement';

const env = useTestEnv();
let entryId: number;

beforeAll(async () => {
  const no = `PI-${uid()}`;
  await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '20' });
  const order = (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!;
  const event = callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '20' }));
  const confirmed = {
    orderNo: `P${no}`,
    merchantNo: event.merchantNo,
    merchantOrderNo: no,
    type: 'payin' as const,
    state: 6,
    amount: '20',
    currency: 'PHP',
  };
  const result = await commitEvent(env.db.db, { event, order, confirmed, target: 'credited' });
  if (result.status !== 'applied' || result.ledgerEntryId === undefined) throw new Error('setup: not applied');
  entryId = result.ledgerEntryId;
});

describe('the ledger is append-only', () => {
  it('refuses to change a posted entry', async () => {
    await expect(
      env.db.db.update(ledgerEntries).set({ amount: '2000' }).where(eq(ledgerEntries.id, entryId)),
    ).rejects.toMatchObject({
      cause: expect.objectContaining({ code: '23001' }),
    });
  });

  it('refuses to delete a posted entry', async () => {
    await expect(env.db.db.delete(ledgerEntries).where(eq(ledgerEntries.id, entryId))).rejects.toMatchObject({
      cause: expect.objectContaining({ code: '23001' }),
    });
    const [row] = await env.db.db
      .select({ amount: ledgerEntries.amount })
      .from(ledgerEntries)
      .where(eq(ledgerEntries.id, entryId));
    expect(row?.amount).toBe('20');
  });

  it('refuses a second entry of the same type for the same order, and a non-positive amount', async () => {
    const [entry] = await env.db.db.select().from(ledgerEntries).where(eq(ledgerEntries.id, entryId));
    const { id: _id, createdAt: _c, ...copy } = entry!;
    await expect(env.db.db.insert(ledgerEntries).values(copy)).rejects.toMatchObject({
      cause: expect.objectContaining({ code: '23505' }),
    });
    await expect(
      env.db.db.execute(sql`insert into ledger_entries (order_id, entry_type, amount, currency, receipt_id)
        values (${copy.orderId}, 'payout_refund', 0, 'PHP', ${copy.receiptId})`),
    ).rejects.toMatchObject({ cause: expect.objectContaining({ code: '23514' }) });
  });
});
