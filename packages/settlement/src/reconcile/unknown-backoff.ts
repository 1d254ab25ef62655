import { reconcileUnknownOrders, type Database } from '@mcb/core/db';
import { eq, sql } from 'drizzle-orm';

/** How long an order answered "unknown" is left out of the sweeps: doubling with each such answer in a row. */
export interface UnknownBackoff {
  /** The wait after the first "unknown" answer, in ms. @defaultValue 900000 (15 minutes: three sweeps at 5m) */
  firstMs: number;
  /** The longest wait, in ms. @defaultValue 21600000 (6 hours) */
  maxMs: number;
}

export const DEFAULT_UNKNOWN_BACKOFF: UnknownBackoff = { firstMs: 15 * 60_000, maxMs: 6 * 3600_000 };

/**
 * Record an "unknown" answer about our order `orderId` at `at`: one more in a row, and the next sweep that may ask
 * again after `firstMs * 2^(n-1)` (at most `maxMs`). Returns how many in a row.
 */
export async function recordUnknown(
  db: Database,
  orderId: number,
  answer: { code: string; at: Date },
  backoff: UnknownBackoff,
): Promise<number> {
  const t = reconcileUnknownOrders;
  const first = backoff.firstMs / 1000;
  const max = backoff.maxMs / 1000;
  const at = answer.at.toISOString();
  // The exponent is capped well before a double overflows; least() then caps the wait itself.
  const wait = (n: ReturnType<typeof sql>) =>
    sql`${at}::timestamptz + make_interval(secs => least(${max}::float8, ${first}::float8 * power(2, least(${n}, 30))))`;
  const [row] = await db
    .insert(t)
    .values({ orderId, unknownCount: 1, lastCode: answer.code, lastAskedAt: answer.at, nextAskAt: wait(sql`0`) })
    .onConflictDoUpdate({
      target: t.orderId,
      set: {
        unknownCount: sql`${t.unknownCount} + 1`,
        lastCode: answer.code,
        lastAskedAt: answer.at,
        nextAskAt: wait(sql`${t.unknownCount}`),
      },
    })
    .returning({ n: t.unknownCount });
  return row?.n ?? 1;
}

/** Get order said something usable about the order again: it is asked on every sweep, as any pending order. */
export async function clearUnknown(db: Database, orderId: number): Promise<void> {
  await db.delete(reconcileUnknownOrders).where(eq(reconcileUnknownOrders.orderId, orderId));
}
