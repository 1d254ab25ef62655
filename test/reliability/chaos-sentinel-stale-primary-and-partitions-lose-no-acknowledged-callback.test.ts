import { describe, expect, it } from 'vitest';
import { runChaos, type ChaosOptions } from './chaos/run-chaos.ts';

// The sentinel fault run of `pnpm test` (issue 27; `pnpm test:chaos --topology sentinel` is the large one): a
// primary, two replicas and three sentinels; ingest on 2 cluster processes, 2 workers through PgBouncer; callbacks
// keep arriving while, one after another, the primary is SIGSTOPped until a replica is promoted and then SIGCONTed
// (a stale primary that ingest still holds connections to), a replica is SIGSTOPped (its replication link cut one
// way), PgBouncer is restarted while workers commit and a worker is SIGKILLed mid-batch. The checker compares every
// `success` ingest answered with Postgres. The recommended setting is asserted: INGEST_MIN_REPLICAS=1 (with
// min-replicas-to-write 1), with ingest's sentinel fence. Before the fence, 1 lost 15-16 acknowledged callbacks in 2 of
// 7 runs: the stale primary, resumed before the sentinels had moved the other replica, got `WAIT 1` from that replica
// (docs/deployment.md, "Stale primaries and partitions"). 0 and 2 are run by `pnpm test:chaos --topology sentinel
// --min-replicas 0|2`; their figures are in the docs, 0's reported, not asserted.
const run = (minReplicas: number): ChaosOptions => ({
  topology: 'sentinel',
  minReplicas,
  payins: 240,
  payouts: 60,
  duplicateShare: 0.2,
  staleShare: 0.05,
  forgedUnknown: 2,
  forgedAmount: 2,
  finalizeSpanMs: 40_000,
  faultGapMs: 3_000,
  settleTimeoutMs: 60_000,
  drainTimeoutMs: 30_000,
  // The single topology's faults; the sentinel topology runs its own instead.
  workerKillIntervalMs: 0,
  pgRestartAtMs: 0,
  redisKillAtMs: 0,
});

describe('chaos, sentinel topology: stale primary, replication link cut, PgBouncer restart, worker SIGKILL', () => {
  it('INGEST_MIN_REPLICAS=1 with min-replicas-to-write 1 and the sentinel fence: every acknowledged callback is credited once, nothing twice, no job failed', async () => {
    const lines: string[] = [];
    const report = await runChaos({
      ...run(1),
      log: (line) => lines.push(line),
    }).finally(() => console.log(lines.join('\n')));
    expect(report.violations).toEqual([]);
    expect(report.audit.missingAcknowledged).toBe(0);
    expect(report.audit.doubleApplied).toBe(0);
    expect(report.audit.credited).toBe(240);
    expect(report.audit.succeeded + report.audit.refused).toBe(60);
    // Every fault happened, and the stale primary was felt by ingest: callbacks refused or unanswered while it was away.
    expect(report.faultWindows?.map((f) => f.name)).toEqual([
      'primary SIGSTOP (stale primary)',
      'replica SIGSTOP (replication link cut)',
      'PgBouncer restart',
      'worker SIGKILL',
    ]);
    expect(report.faultWindows?.[0]?.refused).toBeGreaterThan(0);
    // The last two hit work in flight (the span of the load covers the whole fault sequence).
    expect(report.faultWindows?.slice(2).map((f) => f.detail)).toEqual([
      expect.stringMatching(/with \d+ jobs active/),
      expect.stringMatching(/with \d+ jobs active/),
    ]);
  }, 170_000);
});
