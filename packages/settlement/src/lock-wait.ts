import type { Database } from '@mcb/core/db';
import { causeChain } from '@mcb/core/errors';
import { HELD_ORDERS_SQL } from './commit-sql.ts';
import { inTransaction } from './sql.ts';

/** lock_not_available (lock_timeout) and query_canceled (statement_timeout): a statement waited too long. */
const LOCK_WAIT_SQLSTATES = new Set(['55P03', '57014']);

/**
 * Whether a failed commit waited too long (a lock or statement timeout), judged on the error and its causes. The
 * retry policy calls these transient; the group commit also splits its batch on them (commit.ts).
 */
export function isLockWait(e: unknown): boolean {
  return causeChain(e).some((cur) => {
    const code = (cur as { code?: unknown }).code;
    return typeof code === 'string' && LOCK_WAIT_SQLSTATES.has(code);
  });
}

/** The orders among `ids` whose rows another transaction holds locked right now (nothing is kept locked). */
export async function heldOrders(db: Database, ids: readonly number[]): Promise<Set<number>> {
  const rows = await inTransaction(
    db,
    async (client) => (await client.query<{ id: string }>(HELD_ORDERS_SQL, [ids])).rows,
  );
  return new Set(rows.map((r) => Number(r.id)));
}
