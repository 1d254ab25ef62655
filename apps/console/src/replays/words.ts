/**
 * The words a replay is told in, shared by the pages and the CLI (which must stay light: no database, no views):
 * the dry run's sentence, money first, and the names of what became of the jobs sent back.
 */
import { formatDecimal } from '@mcb/core/money';
import type { PlanTotal, ReplayPlan } from './plan.ts';

export const REPLAY_OUTCOMES = ['credited', 'finalised', 'duplicate', 'review', 'failedAgain', 'retrying'] as const;
export type ReplayOutcome = (typeof REPLAY_OUTCOMES)[number];

/** Words for each outcome, the same on the pages and in the CLI. */
export const OUTCOME_WORDS: Record<ReplayOutcome, string> = {
  credited: 'credited',
  finalised: 'payout finalised',
  duplicate: 'duplicate (applied before: nothing done)',
  review: 'into review',
  failedAgain: 'failed again',
  retrying: 'queued or retrying',
};

export const money = (t: { amount: string; currency: string | null }) =>
  t.currency ? `${formatDecimal(t.amount)} ${t.currency}` : '';
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** "36,790.00 INR + 120.00 USD" of the totals given (those without a known order are left out). */
export function amounts(totals: readonly { amount: string; currency: string | null }[]): string {
  return totals
    .filter((t) => t.currency)
    .map(money)
    .join(' + ');
}

/**
 * The dry run in one sentence, money first: "Will credit 41 orders, 36,790.00 INR; finalise 5 payouts; 0 into
 * review; 3 back to retrying; 2 already applied (no-op)".
 */
export function planSentence(plan: ReplayPlan): string {
  const of = (f: (t: PlanTotal) => boolean) => plan.totals.filter(f);
  const count = (ts: PlanTotal[]) => ts.reduce((n, t) => n + t.orders, 0);
  const credit = of((t) => t.cls === 'willApply' && t.target === 'credited');
  const payouts = of((t) => t.cls === 'willApply' && t.kind === 'payout');
  const succeeded = of((t) => t.cls === 'willApply' && t.target === 'succeeded');
  const refused = of((t) => t.cls === 'willApply' && t.target === 'refused');
  const credited = count(credit) > 0 && amounts(credit) ? `, ${amounts(credit)}` : '';
  const paidOut = amounts(succeeded) ? `, ${amounts(succeeded)}` : '';
  const finalised = count(payouts) > 0 ? ` (${count(succeeded)} succeeded${paidOut}; ${count(refused)} refused)` : '';
  const parts = [
    `credit ${plural(count(credit), 'order')}${credited}`,
    `finalise ${plural(count(payouts), 'payout')}${finalised}`,
    `${plan.counts.willReview} into review`,
    `${plan.counts.stillPending} back to retrying with a fresh budget`,
  ];
  if (plan.counts.willFailAgain > 0) parts.push(`${plan.counts.willFailAgain} fail again at once`);
  if (plan.counts.alreadyApplied > 0) parts.push(`${plan.counts.alreadyApplied} already applied (no-op)`);
  if (plan.counts.notReplayable > 0) parts.push(`${plan.counts.notReplayable} not replayable`);
  return `Will ${parts.join('; ')}.`;
}
