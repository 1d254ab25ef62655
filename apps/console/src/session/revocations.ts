import { consoleRevokedSessions, type Database } from '@mcb/core/db';
import { eq, lt, sql } from 'drizzle-orm';

/**
 * Sessions ended by logout before their expiry, in Postgres (shared by every console instance). A session value is
 * signed and stateless: without this record a logged-out cookie (copied, or left in another browser) would keep
 * working until it expires. A row is useless once its session would have expired, and is pruned then.
 */
export interface SessionRevocations {
  revoke(id: string, expiresAt: Date): Promise<void>;
  isRevoked(id: string): Promise<boolean>;
}

export function createSessionRevocations(db: Database): SessionRevocations {
  return {
    async revoke(id, expiresAt) {
      await db.insert(consoleRevokedSessions).values({ id, expiresAt }).onConflictDoNothing();
      await db.delete(consoleRevokedSessions).where(lt(consoleRevokedSessions.expiresAt, sql`now()`));
    },
    async isRevoked(id) {
      const rows = await db
        .select({ id: consoleRevokedSessions.id })
        .from(consoleRevokedSessions)
        .where(eq(consoleRevokedSessions.id, id))
        .limit(1);
      return rows.length > 0;
    },
  };
}
