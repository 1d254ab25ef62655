/**
 * `merchant_pauses`, the truth of which merchants are paused (a row = paused): read by the workers (each lane holds
 * its jobs while its row is there), the sweep and the console's replay driver. The console alone writes it
 * (apps/console/src/merchants/pause.ts).
 */
import { eq } from 'drizzle-orm';
import type { Database } from './client.ts';
import { merchantPauses, type MerchantPause } from './schema.ts';

/** Every pause now. */
export async function readMerchantPauses(db: Database): Promise<MerchantPause[]> {
  return db.select().from(merchantPauses);
}

/** The pause of merchant number `merchantNo`, or undefined when it runs. */
export async function merchantPauseOf(db: Database, merchantNo: string): Promise<MerchantPause | undefined> {
  const [row] = await db.select().from(merchantPauses).where(eq(merchantPauses.merchantNo, merchantNo)).limit(1);
  return row;
}
