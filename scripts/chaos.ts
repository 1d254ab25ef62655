/**
 * `pnpm test:chaos`: the large chaos run (see docs/reliability.md). Options as flags, e.g.
 *   pnpm test:chaos --payins 3000 --payouts 1000 --span 90s --kill-every 3s
 * Exits 1 when any invariant was violated.
 */
import { parseArgs } from 'node:util';
import { parseDuration } from '@mcb/core/config';
import { runChaos } from '../test/reliability/chaos/run-chaos.ts';

const { values } = parseArgs({
  options: {
    payins: { type: 'string', default: '3000' },
    payouts: { type: 'string', default: '1000' },
    span: { type: 'string', default: '90s' },
    'kill-every': { type: 'string', default: '3s' },
    'pg-restart-at': { type: 'string', default: '30s' },
    'redis-kill-at': { type: 'string', default: '60s' },
    'redis-down': { type: 'string', default: '2s' },
    duplicates: { type: 'string', default: '0.3' },
  },
});

function ms(name: string, v: string): number {
  const n = parseDuration(v);
  if (n === undefined) throw new Error(`--${name}: expected a duration such as 3s or 90s`);
  return n;
}

// Signals end the process through exit, so the servers' exit hooks run.
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));

const span = ms('span', values.span);
const report = await runChaos({
  payins: Number(values.payins),
  payouts: Number(values.payouts),
  duplicateShare: Number(values.duplicates),
  forgedUnknown: 10,
  forgedAmount: 10,
  finalizeSpanMs: span,
  workerKillIntervalMs: ms('kill-every', values['kill-every']),
  pgRestartAtMs: ms('pg-restart-at', values['pg-restart-at']),
  redisKillAtMs: ms('redis-kill-at', values['redis-kill-at']),
  redisDownMs: ms('redis-down', values['redis-down']),
  settleTimeoutMs: 120_000,
  drainTimeoutMs: 120_000,
});
process.exit(report.violations.length === 0 ? 0 : 1);
