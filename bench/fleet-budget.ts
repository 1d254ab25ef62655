/**
 * How much of the fleet's Get order budget (`@mcb/core/platform` `createFleet`) the fleet uses when a process's event
 * loop is busy, and what a budget timestamp written under a faster clock costs (issue 48). Timing-sensitive figures,
 * so they live here rather than in a test; docs/deployment.md has a run's figures.
 *
 *   pnpm bench:fleet-budget [--rps 100] [--seconds 5] [--busy-ms 30] [--every-ms 40] [--ahead-seconds 120]
 *                           [--only idle,busy,pair,ahead] [--rounds 1]
 *
 * Each "process" (the main thread, and a worker thread for a second one: each its own event loop, Redis connection
 * and fleet handle) keeps more Get orders waiting than the budget can start (a closed loop of 2 × rps waiters) for
 * `--seconds`, on the bench's own redis-server, and counts the start times it used. Runs (`--only`, each `--rounds`
 * times):
 * - idle: one process, nothing else on its event loop;
 * - busy: one process whose event loop a timer spins for `--busy-ms` every `--every-ms` (CPU-bound work beside the
 *   requests), so that start-time timers fire late;
 * - pair: that busy process and a quiet one share the budget;
 * - ahead: the budget's timestamp is first set `--ahead-seconds` ahead of Redis's clock (a Sentinel failover to a
 *   replica whose clock is behind, an NTP step back), and the run reports when the first Get order could start.
 */
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import { createFleet } from '@mcb/core/platform';
import { createRedis } from '@mcb/core/redis';
import { progress, section } from './lib/progress.ts';
import { startRedis } from './lib/redis-server.ts';
import { merchantKeys } from '@mcb/core/queue';

/** What one process of a run is told. */
interface Part {
  url: string;
  prefix: string;
  rps: number;
  /** The window counted, in ms of the wall clock (performance.timeOrigin + performance.now()). */
  from: number;
  to: number;
  /** Spin the event loop this long every `everyMs` (0: never). */
  busyMs: number;
  everyMs: number;
}

/** What one process of a run measured: its start times (ms, wall clock). */
interface Used {
  times: number[];
}

/** Spin the event loop for `busy` ms every `every` ms until stopped (0: never). */
function busyLoop(busy: number, every: number): () => void {
  if (busy <= 0) return () => undefined;
  const timer = setInterval(() => {
    const end = performance.now() + busy;
    while (performance.now() < end);
  }, every);
  return () => clearInterval(timer);
}

/** One process's part: 2 × rps Get orders waiting on its own fleet handle for `seconds`. */
async function takePart(p: Part): Promise<Used> {
  const client = createRedis(p.url, 'worker');
  client.on('error', () => undefined);
  const fleet = createFleet({ redis: client, keys: merchantKeys(p.prefix).fleet, maxRps: p.rps });
  const now = () => performance.timeOrigin + performance.now();
  const times: number[] = [];
  let stopped = false;
  const waiter = async (): Promise<void> => {
    while (!stopped) {
      await fleet.take();
      const t = now();
      if (t >= p.from && t <= p.to) times.push(t);
    }
  };
  const stopBusy = busyLoop(p.busyMs, p.everyMs);
  const waiters = Array.from({ length: 2 * p.rps }, () => waiter().catch(() => undefined));
  await new Promise((r) => setTimeout(r, Math.max(0, p.to - now())));
  stopped = true;
  stopBusy();
  await fleet.close();
  // Bounded: before issue 48 a request whose start time fired late after close() was never settled.
  await Promise.race([Promise.all(waiters), new Promise((r) => setTimeout(r, 1000))]);
  client.disconnect();
  return { times };
}

/**
 * A worker thread (a second event loop, as a second process has), once it has loaded its modules: it runs
 * {@link takePart} with the part it is given.
 */
async function startThread(): Promise<(p: Part) => Promise<Used>> {
  const worker = new Worker(new URL(import.meta.url));
  await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return (p) =>
    new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.postMessage(p);
    });
}

/** The most events in any one-second window. */
function busiestSecond(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[j]! - sorted[i]! >= 1000) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

async function main(): Promise<void> {
  const { values: a } = parseArgs({
    options: {
      rps: { type: 'string', default: '100' },
      seconds: { type: 'string', default: '5' },
      'busy-ms': { type: 'string', default: '30' },
      'every-ms': { type: 'string', default: '40' },
      'ahead-seconds': { type: 'string', default: '120' },
      only: { type: 'string', default: 'idle,busy,pair,ahead' },
      rounds: { type: 'string', default: '1' },
    },
  });
  const [rps, seconds, busyMs, everyMs, aheadSeconds] = [
    a.rps,
    a.seconds,
    a['busy-ms'],
    a['every-ms'],
    a['ahead-seconds'],
  ].map(Number) as [number, number, number, number, number];
  if (![rps, seconds, busyMs, everyMs, aheadSeconds].every((n) => Number.isFinite(n) && n >= 0) || rps < 1)
    throw new Error('--rps (>= 1), --seconds, --busy-ms, --every-ms and --ahead-seconds take non-negative numbers');

  section(`fleet budget: ${rps}/s for ${seconds} s, ${2 * rps} Get orders waiting in each process`);
  const redis = await startRedis();
  try {
    const budget = Math.round(rps * seconds);
    const run = async (label: string, names: [string, number][], aheadUs = 0) => {
      const threads = await Promise.all(names.slice(1).map(() => startThread()));
      const from = performance.timeOrigin + performance.now();
      const parts = names.map(([name, busy]) => part(name, busy, from));
      if (aheadUs > 0) {
        const [sec, usec] = (await redis.admin.time()).map(Number) as [number, number];
        await redis.admin.hset(
          merchantKeys(parts[0]!.prefix).fleet.budget,
          'tat',
          String(sec * 1_000_000 + usec + aheadUs),
        );
      }
      const used = await Promise.all(parts.map((p, i) => (i === 0 ? takePart(p) : threads[i - 1]!(p))));
      const times = used.flatMap((u) => u.times);
      const first = times.length ? Math.min(...times) - parts[0]!.from : NaN;
      progress(
        `${label}: ${times.length} of ${budget} start times used in ${seconds} s (${((100 * times.length) / budget).toFixed(0)} %` +
          `${parts.length > 1 ? `; ${used.map((u) => u.times.length).join(' + ')}` : ''}), busiest second ${busiestSecond(times)}, ` +
          `first start after ${first.toFixed(0)} ms`,
      );
    };
    const part = (name: string, busy: number, from: number): Part => ({
      url: redis.url,
      prefix: `bench-fleet-${name}`,
      rps,
      from,
      to: from + seconds * 1000,
      busyMs: busy,
      everyMs,
    });
    const busy = `${busyMs} ms of every ${everyMs} ms`;
    const only = new Set(a.only.split(','));
    for (let round = 0; round < Number(a.rounds); round++) {
      if (only.has('idle')) await run('one process, idle event loop', [[`idle${round}`, 0]]);
      if (only.has('busy')) await run(`one process, busy event loop (${busy})`, [[`busy${round}`, busyMs]]);
      if (only.has('pair'))
        await run(`two processes, one busy (${busy}) and one idle`, [
          [`pair${round}`, busyMs],
          [`pair${round}`, 0],
        ]);
      if (only.has('ahead'))
        await run(`one process, budget timestamp ${aheadSeconds} s ahead`, [[`ahead${round}`, 0]], aheadSeconds * 1e6);
    }
  } finally {
    await redis.close();
  }
}

if (isMainThread) await main();
else {
  parentPort!.once('message', (p: Part) => void takePart(p).then((used) => parentPort!.postMessage(used)));
  parentPort!.postMessage('ready');
}
