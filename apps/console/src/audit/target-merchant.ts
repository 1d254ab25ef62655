import { replays, reviews, type Database } from '@mcb/core/db';
import { eq } from 'drizzle-orm';
import type { FastifyRequest } from 'fastify';
import { ownerOf } from '../orders/api.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';

/**
 * The merchant (its number) a table route's action is about, from the request as sent: what the role check's refusal
 * records (`operator_actions.merchant_no`) when it answers before the action runs. The action itself names its merchant
 * to the action layer ({@link ActionSpec.merchant}); this reads the same things: a review's or a replay's row, an
 * order's owner, or the `merchant` ref a body or query names. null when none is known.
 */
export type TargetMerchant = (req: FastifyRequest, target: string) => Promise<string | null>;

export function targetMerchantOf(deps: { db: Database; merchants: ConsoleMerchants }): TargetMerchant {
  const { db, merchants } = deps;
  const byRef = (ref: unknown) =>
    typeof ref === 'string' ? (merchants.all.find((m) => m.merchant.ref === ref)?.merchant.merchantNo ?? null) : null;
  const only = () => (merchants.several ? null : (merchants.all[0]?.merchant.merchantNo ?? null));
  return async (req, target) => {
    const params = (req.params ?? {}) as { id?: unknown; merchantOrderNo?: unknown; ref?: unknown };
    // A merchant's own route (`/api/merchants/:ref/pause`): the ref it names.
    if (typeof params.ref === 'string') return byRef(params.ref);
    const id = Number(params.id);
    const validId = Number.isSafeInteger(id) && id > 0;
    if (target.startsWith('review:') && validId) {
      const [row] = await db.select({ no: reviews.merchantNo }).from(reviews).where(eq(reviews.id, id));
      return row?.no ?? null;
    }
    if (target.startsWith('replay:') && validId) {
      const [row] = await db.select({ filter: replays.filter }).from(replays).where(eq(replays.id, id));
      if (!row) return null;
      return byRef((row.filter as { merchant?: unknown } | null)?.merchant) ?? only();
    }
    if (typeof params.merchantOrderNo === 'string')
      return ownerOf(db, merchants, params.merchantOrderNo, req.query).catch(() => null);
    const body = (req.body ?? {}) as { merchant?: unknown; filter?: { merchant?: unknown } };
    const query = (req.query ?? {}) as { merchant?: unknown };
    const ref = body.filter?.merchant ?? body.merchant ?? query.merchant;
    return ref !== undefined && ref !== '' ? byRef(ref) : only();
  };
}
