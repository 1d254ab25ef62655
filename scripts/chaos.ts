/**
 * `pnpm test:chaos`: the large chaos run (see docs/reliability.md). Options as flags, e.g.
 *   pnpm test:chaos --payins 3000 --payouts 1000 --span 90s --kill-every 3s
 *   pnpm test:chaos --topology sentinel --min-replicas 1 --payins 800 --payouts 200 --span 40s --fault-gap 4s
 *   pnpm test:chaos --worker-concurrency adaptive   (each worker at its production default: the adaptive limit, 4 fetch loops)
 * The sentinel topology (a primary, two replicas, three sentinels, PgBouncer) replaces the worker kills, Postgres
 * restart and Redis SIGKILL with its own faults: a stale primary, a replication link cut, a PgBouncer restart and a
 * worker SIGKILL mid-batch (test/reliability/chaos/sentinel-faults.ts).
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
    topology: { type: 'string', default: 'single' },
    'min-replicas': { type: 'string', default: '1' },
    'fault-gap': { type: 'string', default: '4s' },
    'worker-concurrency': { type: 'string', default: '8' },
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
const topology = values.topology;
if (topology !== 'single' && topology !== 'sentinel') throw new Error('--topology: expected single or sentinel');
const minReplicas = Number(values['min-replicas']);
if (!Number.isInteger(minReplicas) || minReplicas < 0 || minReplicas > 2)
  throw new Error('--min-replicas: expected 0, 1 or 2');
const concurrencyFlag = values['worker-concurrency'];
const workerConcurrency = concurrencyFlag === 'adaptive' ? 'adaptive' : Number(concurrencyFlag);
if (workerConcurrency !== 'adaptive' && !(Number.isInteger(workerConcurrency) && workerConcurrency > 0)) {
  throw new Error('--worker-concurrency: expected a positive whole number or adaptive');
}
const report = await runChaos({
  stack: { workerConcurrency },
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
  topology,
  minReplicas,
  faultGapMs: ms('fault-gap', values['fault-gap']),
  settleTimeoutMs: 120_000,
  drainTimeoutMs: 120_000,
});
process.exit(report.violations.length === 0 ? 0 : 1);
