import { describe, expect, it } from 'vitest';
import { runChaos } from './chaos/run-chaos.ts';

// The bounded chaos run of `pnpm test`: the same engine as `pnpm test:chaos`, fewer orders, a shorter span.
// 2 ingest cluster processes, 3 worker processes (one SIGKILLed every 3 s), one Postgres restart, one Redis
// SIGKILL + AOF restart, duplicates, stale and forged events. Every server is the run's own.
describe('chaos: workers SIGKILLed, Postgres restarted, Redis SIGKILLed and restarted from its AOF', () => {
  it('credits or finalises every finalised order exactly once, adds no extra ledger entry and leaves no job failed', async () => {
    const lines: string[] = [];
    const report = await runChaos({
      // One block of output at the end, rather than a vitest header per line.
      log: (line) => lines.push(line),
      payins: 300,
      payouts: 100,
      duplicateShare: 0.3,
      staleShare: 0.05,
      forgedUnknown: 3,
      forgedAmount: 3,
      finalizeSpanMs: 18_000,
      workerKillIntervalMs: 3_000,
      pgRestartAtMs: 5_000,
      redisKillAtMs: 10_000,
      redisDownMs: 1_500,
      settleTimeoutMs: 45_000,
      drainTimeoutMs: 30_000,
    }).finally(() => console.log(lines.join('\n')));
    expect(report.violations).toEqual([]);
    // The faults really happened and really hit traffic.
    expect(report.faults.workerKills).toBeGreaterThanOrEqual(4);
    expect(report.faults.pgRestarts).toBe(1);
    expect(report.faults.redisRestarts).toBe(1);
    expect(report.replies['503'] ?? 0, 'callbacks refused while Redis was down').toBeGreaterThan(0);
    expect(report.callbacks.duplicateCopies).toBeGreaterThan(0);
    expect(report.audit.credited).toBe(300);
    expect(report.audit.succeeded + report.audit.refused).toBe(100);
    expect(report.audit.ledgerEntries).toBe(report.audit.credited + report.audit.refused);
    expect(report.audit.queue.failed).toBe(0);
  }, 150_000);
});
