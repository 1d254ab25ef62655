/**
 * Pause and resume a merchant (docs/merchants.md "Pausing a merchant"): one action per verb, called by the API
 * (pause-api.ts), the merchants page and the CLI (through the API). The role (operator), the reason and the audit row
 * (with the merchant's number) are checked and written here, the audit row in the same transaction as the row of
 * `merchant_pauses` (STYLE 18). The workers read the table (apps/worker/src/merchant-pause.ts); the Redis mirror that
 * ingest reads is written after the commit, and rebuilt by every worker from the table if that write is lost.
 */
import type { Merchant } from '@mcb/core/config';
import { merchantPauseOf, merchantPauses, type Database, type MerchantPause } from '@mcb/core/db';
import { AppError, coerceError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { merchantKeys, writePauseMirror } from '@mcb/core/queue';
import type { RedisClient } from '@mcb/core/redis';
import { eq } from 'drizzle-orm';
import { z } from 'zod';
import { performAction, type Actor, type EffectResult } from '../audit/perform.ts';

/** What the pause actions need. */
export interface MerchantPauseDeps {
  db: Database;
  logger: Logger;
  /** The console's merchants (config order). */
  merchants: readonly Merchant[];
  /** Where the pause is mirrored for ingest; none: the workers write it within a poll. @defaultValue none */
  redis?: RedisClient;
  /** QUEUE_PREFIX, under which the mirror is named (`merchantKeys`). */
  queuePrefix: string;
}

/** A merchant's pause state, as the API answers it. */
export const merchantPauseViewSchema = z
  .object({
    merchant: z.string().describe("The merchant's ref"),
    merchantNo: z.string(),
    paused: z.boolean(),
    pausedBy: z.string().nullable().describe('Who paused it (null while it runs)'),
    reason: z.string().nullable().describe('Why it was paused (null while it runs)'),
    since: z.string().nullable().describe('When it was paused, ISO 8601 (null while it runs)'),
  })
  .describe('MerchantPause');
export type MerchantPauseView = z.infer<typeof merchantPauseViewSchema>;

/** The audit target of a pause or resume: `merchant:{ref}` (cut short for a ref nobody configured). */
export const merchantTarget = (ref: string): string => `merchant:${ref.slice(0, 40)}`;

/** The configured merchant `ref` names; 404 NOT_FOUND naming it otherwise. */
export function merchantByRef(merchants: readonly Merchant[], ref: string): Merchant {
  const merchant = merchants.find((m) => m.ref === ref);
  if (!merchant)
    throw new AppError(
      ErrorCodes.NOT_FOUND,
      `no merchant "${ref.slice(0, 40)}": this console serves ${merchants.map((m) => m.ref).join(', ')}`,
    );
  return merchant;
}

/** The view of `merchant` with its pause row (or none). */
export function pauseView(merchant: Merchant, pause: MerchantPause | undefined): MerchantPauseView {
  return {
    merchant: merchant.ref,
    merchantNo: merchant.merchantNo,
    paused: pause !== undefined,
    pausedBy: pause?.pausedBy ?? null,
    reason: pause?.reason ?? null,
    since: pause?.since.toISOString() ?? null,
  };
}

/** The pause state of merchant `ref` now (404 for an unknown ref): for the page and the CLI. */
export async function merchantPauseState(deps: MerchantPauseDeps, ref: string): Promise<MerchantPauseView> {
  const merchant = merchantByRef(deps.merchants, ref);
  return pauseView(merchant, await merchantPauseOf(deps.db, merchant.merchantNo));
}

/**
 * Pause merchant `ref` (role operator, a reason): its row in merchant_pauses, written with its audit row in one
 * transaction. Every worker holds its lane within a poll (0.5 s), its sweep and replays wait, and ingest bounds its
 * backlog. 404 for an unknown ref; 409 MERCHANT_ALREADY_PAUSED (naming who and since when) when it is paused already:
 * the first pause's who, why and since stay as they were.
 */
export async function pauseMerchant(
  deps: MerchantPauseDeps,
  actor: Actor,
  input: { ref: string; reason: unknown },
): Promise<MerchantPauseView> {
  const view = await merchantAction(deps, actor, 'pause', input, async (tx, known) => {
    const [row] = await tx
      .insert(merchantPauses)
      .values({ merchantNo: known.merchantNo, pausedBy: actor.operator.name, reason: reasonOf(input.reason) })
      .onConflictDoNothing()
      .returning();
    if (!row) throw await alreadyPaused(tx, known);
    return { result: pauseView(known, row), outcome: 'paused', details: { merchant: known.ref } };
  });
  await mirror(deps, input.ref, view.since === null ? undefined : new Date(view.since));
  return view;
}

/**
 * Resume merchant `ref` (role operator, a reason): its row removed, with its audit row (which keeps who paused it and
 * since when) in one transaction. The workers take its jobs again within a poll, at its Get order budget. 404 for an
 * unknown ref; 409 MERCHANT_NOT_PAUSED when it runs.
 */
export async function resumeMerchant(
  deps: MerchantPauseDeps,
  actor: Actor,
  input: { ref: string; reason: unknown },
): Promise<MerchantPauseView> {
  const view = await merchantAction(deps, actor, 'resume', input, async (tx, known) => {
    const [row] = await tx.delete(merchantPauses).where(eq(merchantPauses.merchantNo, known.merchantNo)).returning();
    if (!row)
      throw new AppError(ErrorCodes.MERCHANT_NOT_PAUSED, `merchant "${known.ref}" is not paused: nothing to resume`);
    return {
      result: pauseView(known, undefined),
      outcome: 'resumed',
      details: {
        merchant: known.ref,
        pausedBy: row.pausedBy,
        pausedSince: row.since.toISOString(),
        pausedForSeconds: Math.round((Date.now() - row.since.getTime()) / 1000),
      },
    };
  });
  await mirror(deps, input.ref, undefined);
  return view;
}

/**
 * The audited action `merchants.{verb}` on merchant `input.ref`: the role, reason and scope checks (audit/perform.ts,
 * naming the merchant's number when the ref is configured), then `change` on the merchant (404 for an unknown ref) in
 * the audit row's transaction.
 */
function merchantAction(
  deps: MerchantPauseDeps,
  actor: Actor,
  verb: 'pause' | 'resume',
  input: { ref: string; reason: unknown },
  change: (tx: Database, known: Merchant) => Promise<EffectResult<MerchantPauseView>>,
): Promise<MerchantPauseView> {
  const merchant = deps.merchants.find((m) => m.ref === input.ref);
  return performAction(
    deps,
    actor,
    {
      action: `merchants.${verb}`,
      target: merchantTarget(input.ref),
      reason: input.reason,
      merchant: merchant?.merchantNo ?? null,
    },
    (tx) => change(tx, merchantByRef(deps.merchants, input.ref)),
  );
}

/** The reason as the action layer checked it (the audit row's); the row keeps the same text. */
function reasonOf(reason: unknown): string {
  return typeof reason === 'string' ? reason.trim() : '';
}

/** 409 naming the pause in place. */
async function alreadyPaused(tx: Database, merchant: Merchant): Promise<AppError> {
  const pause = await merchantPauseOf(tx, merchant.merchantNo);
  const who = pause ? ` by ${pause.pausedBy} since ${pause.since.toISOString()}` : '';
  return new AppError(ErrorCodes.MERCHANT_ALREADY_PAUSED, `merchant "${merchant.ref}" is already paused${who}`);
}

/** The Redis mirror for ingest, after the commit; a failed write is logged (the workers rebuild it within a poll). */
async function mirror(deps: MerchantPauseDeps, ref: string, since: Date | undefined): Promise<void> {
  if (!deps.redis) return;
  try {
    await writePauseMirror(deps.redis, merchantKeys(deps.queuePrefix, ref), since);
  } catch (e) {
    deps.logger.warn(
      { err: coerceError(e), merchant: ref },
      'the Redis mirror of a merchant pause not written: the workers rebuild it within a second',
    );
  }
}
