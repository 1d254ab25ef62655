/**
 * When a merchant needs a person (the landing page's line, the merchants page's marks): paused, its breaker open,
 * jobs failed for good, a backlog whose oldest job waits too long, or callbacks arriving while nothing is credited.
 * Nothing when all is well.
 */
import type { MerchantFigures } from './queries.ts';

/** A waiting job older than this says the merchant's backlog does not drain. */
export const OLD_WAITING_MS = 2 * 60_000;

/** One line per reason, in the order a person would act on them. */
export function attentionOf(f: Omit<MerchantFigures, 'attention'>, now: number): string[] {
  const lines: string[] = [];
  if (f.paused) lines.push(`paused by ${f.paused.by}: ${f.paused.reason}`);
  if (f.breaker === 'open') lines.push('Get order breaker open: its callbacks wait for the platform');
  if (f.failed !== null && f.failed > 0) lines.push(`${f.failed} job(s) failed for good`);
  const oldest = f.oldestWaitingSince ? Date.parse(f.oldestWaitingSince) : NaN;
  if (!f.paused && Number.isFinite(oldest) && now - oldest > OLD_WAITING_MS)
    lines.push(`backlog: ${f.waiting ?? '?'} waiting, the oldest for ${minutes(now - oldest)}`);
  if (!f.paused && (f.receivedLast10Minutes ?? 0) > 0 && f.creditsLast10Minutes === 0)
    lines.push(`no credits in 10 minutes while ${f.receivedLast10Minutes} callback(s) arrived`);
  return lines;
}

function minutes(ms: number): string {
  const m = Math.floor(ms / 60_000);
  return m >= 120 ? `${Math.floor(m / 60)} h ${m % 60} min` : `${m} min`;
}
