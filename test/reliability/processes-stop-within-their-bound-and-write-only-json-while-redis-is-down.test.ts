import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, MERCHANT_NO, startFakePlatform, startOwnRedis, useTestEnv, waitFor } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';
import { startNodeProcess, type NodeProcess } from './helpers/node-process.ts';
import { createTestKeys } from './helpers/keys.ts';
import { captureLines, parseLine, type OutputLine } from './helpers/output-lines.ts';

// Issue 32: a worker, an ingest (a primary and two forked workers) and a console, each a real process on its own
// Redis. Redis dies; readiness fails and the gauge says since when; after more than one log interval every process
// gets SIGTERM, as a deploy or a drain sends it. Each exits within its shutdown bound (3 s here), and everything it
// wrote is JSON, one object per line, with at most one Redis error line per interval per connection.
const BOUND_MS = 3000;
// Signal delivery and process teardown after the bound's own timer fires; the bound itself is what is under test.
const EXIT_SLACK_MS = 1000;
// The throttle's interval (10 s, createLogThrottle's default): the outage outlasts it so lines are held back and counted.
const LOG_INTERVAL_MS = 10_000;
const OUTAGE_MS = LOG_INTERVAL_MS + 2000;

async function readyz(port: number): Promise<number> {
  return (
    (await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(5000) }).catch(() => undefined))
      ?.status ?? 0
  );
}

/** Lines that carry a Redis connection error. */
const isRedisErrorLine = (l: Record<string, unknown>) =>
  /ECONNREFUSED|ECONNRESET|Connection is closed/.test(
    String((l.err as { message?: unknown } | undefined)?.message ?? ''),
  );

/** Redis error lines, grouped by what throttles them: the connection or source. */
function errorLinesByKey(lines: Record<string, unknown>[]): Map<string, number[]> {
  const byKey = new Map<string, number[]>();
  for (const l of lines) {
    if (!isRedisErrorLine(l)) continue;
    const key = String(l.connection ?? l.source ?? l.msg);
    byKey.set(key, [...(byKey.get(key) ?? []), Number(l.time)]);
  }
  return byKey;
}

/** The most lines of one key within any window of `intervalMs`. */
function mostLinesPerInterval(times: number[], intervalMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= intervalMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe('with Redis gone, worker, ingest and console stop within their bound and write only JSON', () => {
  const env = useTestEnv();

  it(`SIGTERM after a ${OUTAGE_MS / 1000} s outage: each exits within ${BOUND_MS} ms; every line JSON; error lines at most one per ${LOG_INTERVAL_MS / 1000} s per connection`, async () => {
    const closers: (() => Promise<unknown>)[] = [];
    const logDir = mkdtempSync(join(tmpdir(), 'mcb-redis-gone-'));
    try {
      const redis = await startOwnRedis();
      closers.push(() => redis.destroy());
      const platform = await startFakePlatform();
      closers.push(() => platform.close());
      const keys = createTestKeys();
      closers.push(async () => keys.remove());
      const [workerOps, ingestPort, ingestOps, consolePort, consoleOps] = await Promise.all([
        freePort(),
        freePort(),
        freePort(),
        freePort(),
        freePort(),
      ]);
      const common = {
        MERCHANT_NO,
        REDIS_URL: redis.url,
        QUEUE_PREFIX: env.prefix,
        DATABASE_URL: env.databaseUrl,
        PLATFORM_BASE_URL: platform.url,
        PLATFORM_ALLOW_HTTP: 'true',
        LOG_LEVEL: 'info',
        WORKER_SHUTDOWN_TIMEOUT: `${BOUND_MS}ms`,
        INGEST_SHUTDOWN_TIMEOUT: `${BOUND_MS}ms`,
        CONSOLE_SHUTDOWN_TIMEOUT: `${BOUND_MS}ms`,
      };
      // `processes`: how many processes write into that output, each throttling its own lines (ingest's two workers).
      const specs: { name: string; readyPort: number; processes: number; env: Record<string, string> }[] = [
        { name: 'worker', readyPort: workerOps, processes: 1, env: { WORKER_METRICS_PORT: String(workerOps) } },
        {
          name: 'ingest',
          readyPort: ingestPort,
          processes: 2,
          env: {
            MERCHANT_PRIVATE_KEY_FILE: keys.privateKeyFile,
            INGEST_WORKERS: '2',
            INGEST_PORT: String(ingestPort),
            INGEST_METRICS_PORT: String(ingestOps),
          },
        },
        {
          name: 'console',
          readyPort: consoleOps,
          processes: 1,
          env: {
            CONSOLE_TOKEN: 'redis-gone-test-token-0123',
            CONSOLE_PORT: String(consolePort),
            CONSOLE_METRICS_PORT: String(consoleOps),
          },
        },
      ];
      const procs: {
        name: string;
        readyPort: number;
        processes: number;
        proc: NodeProcess;
        output: { lines(): OutputLine[] };
      }[] = [];
      for (const s of specs) {
        const proc = startNodeProcess(
          s.name,
          `apps/${s.name}/src/main.ts`,
          { ...common, ...s.env },
          join(logDir, `${s.name}.log`),
        );
        procs.push({ name: s.name, readyPort: s.readyPort, processes: s.processes, proc, output: captureLines(proc) });
        closers.push(() => proc.kill());
      }

      // 1. Every process ready (ingest on its public port, worker and console on their ops listeners).
      await waitFor(async () => (await Promise.all(procs.map((p) => readyz(p.readyPort)))).every((s) => s === 200), {
        timeoutMs: 60_000,
        message: `not every process became ready (logs: ${logDir})`,
      });
      // Ingest's port answers once one of its workers listens: wait for both, so that none is still starting when
      // Redis dies (a worker that cannot reach Redis at start exits and is forked again: another test's subject).
      const ingest = procs.find((p) => p.name === 'ingest')!;
      const listening = () => ingest.output.lines().filter((l) => l.text.includes('"ingest listening"')).length;
      await waitFor(() => listening() >= ingest.processes, {
        timeoutMs: 60_000,
        message: `ingest workers listening: ${listening()} (logs: ${logDir})`,
      });

      // 2. Redis dies. Readiness fails everywhere, and the gauge says since when.
      await redis.kill();
      const downAt = Date.now();
      await waitFor(async () => (await Promise.all(procs.map((p) => readyz(p.readyPort)))).every((s) => s === 503), {
        timeoutMs: 10_000,
        message: 'readiness did not fail on every process while Redis is gone',
      });
      const workerMetrics = await (
        await fetch(`http://127.0.0.1:${workerOps}/metrics`, { signal: AbortSignal.timeout(10_000) })
      ).text();
      const since = Number(
        /mcb_redis_down_since_seconds\{connection="mcb-worker",app="worker"\} (\d+)/.exec(workerMetrics)?.[1],
      );
      expect(since).toBeGreaterThanOrEqual(Math.floor(downAt / 1000) - 1);
      expect(since).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
      expect(workerMetrics).toMatch(/mcb_redis_up\{connection="mcb-worker",app="worker"\} 0/);

      // 3. The outage lasts past one log interval (reconnect attempts keep failing all along).
      await waitFor(() => Date.now() - downAt >= OUTAGE_MS, { timeoutMs: OUTAGE_MS + 5000 });

      // 4. SIGTERM to all three at once; each must exit within its bound.
      const signalled = performance.now();
      for (const p of procs) process.kill(p.proc.pid, 'SIGTERM');
      const exits = await Promise.all(
        procs.map(async (p) => ({ name: p.name, ...(await p.proc.exited), ms: performance.now() - signalled })),
      );
      for (const e of exits)
        expect(e.ms, `${e.name} took ${e.ms.toFixed(0)} ms to exit`).toBeLessThan(BOUND_MS + EXIT_SLACK_MS);
      // Nothing can be recorded in a Redis that is gone: the worker's stop is forced (exit 1); the others finish.
      expect(exits.map((e) => [e.name, e.code, e.signal])).toEqual([
        ['worker', 1, null],
        ['ingest', 0, null],
        ['console', 0, null],
      ]);

      // 5. Everything each wrote: JSON, one object per line; Redis error lines at most one per interval per connection.
      for (const p of procs) {
        const parsed = p.output.lines().map(parseLine);
        const bad = parsed.flatMap((r) => (r.ok ? [] : [r.line]));
        expect(bad, `${p.name} wrote lines that are not JSON`).toEqual([]);
        const values = parsed.flatMap((r) => (r.ok ? [r.value] : []));
        const byKey = errorLinesByKey(values);
        expect(byKey.size, `${p.name} logged no Redis error at all`).toBeGreaterThan(0);
        for (const [key, times] of byKey) {
          // One line at the start of the outage, then one per interval: never two within an interval (per process).
          expect(
            mostLinesPerInterval(times, LOG_INTERVAL_MS),
            `${p.name}: ${key} at ${times.join(', ')}`,
          ).toBeLessThanOrEqual(p.processes);
        }
        // A line after the first of its key stands for the errors held back since (errorsSinceLastLine > 1).
        const counted = values.filter(isRedisErrorLine).map((l) => Number(l.errorsSinceLastLine));
        expect(
          counted.every((n) => n >= 1),
          `${p.name}: every error line carries its count`,
        ).toBe(true);
        expect(Math.max(...counted), `${p.name}: lines were held back and counted`).toBeGreaterThan(1);
      }
      const workerLines = procs[0]!.output
        .lines()
        .map(parseLine)
        .flatMap((r) => (r.ok ? [r.value] : []));
      expect(workerLines.map((l) => l.msg)).toContain('stopped (forced): exiting 1');
      expect(
        workerLines.some((l) => String(l.msg).startsWith('stop forced: 0 callbacks job(s) left in progress')),
      ).toBe(true);
      rmSync(logDir, { recursive: true, force: true });
    } finally {
      for (const c of closers.reverse()) await c().catch(() => undefined);
    }
  }, 150_000);
});
