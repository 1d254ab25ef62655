/**
 * The faults of the sentinel topology, one after another while callbacks keep arriving (docs/reliability.md,
 * "Stale primaries and partitions"):
 * 1. the primary SIGSTOPped until the sentinels have promoted a replica, then SIGCONTed: it comes back believing it
 *    is primary, and ingest's and the workers' connections to it are still open, until the sentinels demote it;
 * 2. a one-way cut of a replication link: a replica SIGSTOPped for longer than down-after-milliseconds (the primary
 *    keeps writing to a socket nobody reads);
 * 3. PgBouncer restarted (immediate shutdown) while workers commit;
 * 4. a worker SIGKILLed while it holds active jobs.
 * Each fault's window is kept, so the report can say what ingest answered during it and for how long it refused.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { waitFor } from '@mcb/testkit';
import type { Delivery } from '../../../apps/sandbox/src/app.ts';
import { queueCounts } from './audit.ts';
import type { ChaosStack } from './stack.ts';

export interface FaultWindow {
  name: string;
  /** Epoch ms. */
  startedAt: number;
  /** When the fault was over (process resumed, PgBouncer listening again, worker restarted); epoch ms. */
  endedAt: number;
  detail: string;
}

/** What ingest answered from a fault's start to the next fault's start (or the end of the run). */
export interface FaultReplies {
  name: string;
  /** Sends by reply: HTTP status, or 'none' (no reply). */
  replies: Record<string, number>;
  /** Sends not acknowledged in the window. */
  refused: number;
  /** From the fault's start to the reply of the last refused send in the window, ms (0: none refused). */
  refusedForMs: number;
}

/** Run the four faults in order, `gapMs` of plain load before each. */
export async function runSentinelFaults(
  stack: ChaosStack,
  gapMs: number,
  log: (line: string) => void,
  t0: number,
): Promise<FaultWindow[]> {
  const sentinel = stack.sentinel;
  if (!sentinel) throw new Error('the sentinel faults need the sentinel topology');
  const nodes = [sentinel.primary, ...sentinel.replicas];
  const nodeOn = (port: number) => nodes.find((n) => n.port === port)!;
  const signal = (port: number, sig: NodeJS.Signals) => process.kill(nodeOn(port).pid()!, sig);
  const windows: FaultWindow[] = [];
  const done = (w: FaultWindow) => {
    windows.push(w);
    log(`chaos: ${w.name} at ${w.startedAt - t0} ms, over after ${w.endedAt - w.startedAt} ms: ${w.detail}`);
  };
  const role = async (port: number) => {
    const r = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, lazyConnect: true });
    r.on('error', () => {});
    try {
      return /role:(\w+)/.exec(await r.info('replication'))?.[1] ?? '?';
    } catch {
      return '?';
    } finally {
      r.disconnect();
    }
  };
  /** Wait (up to 10 s) until a worker holds active jobs, so the fault hits work in flight; says whether it did. */
  const whileActive = async (): Promise<string> => {
    const redis = new Redis(await stack.primaryUrl(), { maxRetriesPerRequest: 1 });
    redis.on('error', () => {});
    try {
      const active = await waitFor(
        async () => {
          const n = (await queueCounts(redis, stack.prefix).catch(() => undefined))?.active ?? 0;
          return n > 0 ? n : false;
        },
        {
          timeoutMs: 10_000,
          intervalMs: 20,
        },
      ).catch(() => 0);
      return active > 0 ? `with ${active} jobs active` : 'with NO job active (the load had ended: lengthen the span)';
    } finally {
      redis.disconnect();
    }
  };

  // 1. Stale primary.
  await delay(gapMs);
  const oldPort = await sentinel.primaryPort();
  let s = Date.now();
  signal(oldPort, 'SIGSTOP');
  const newPort = await waitFor(
    async () => {
      const p = await sentinel.primaryPort().catch(() => oldPort);
      return p !== oldPort ? p : false;
    },
    { timeoutMs: 60_000, intervalMs: 50, message: 'the sentinels did not promote a replica' },
  );
  const promotedAfter = Date.now() - s;
  signal(oldPort, 'SIGCONT');
  const contAt = Date.now();
  // It believes it is primary until a sentinel tells it otherwise.
  await waitFor(async () => (await role(oldPort)) === 'slave', {
    timeoutMs: 30_000,
    intervalMs: 20,
    message: 'the old primary was never demoted',
  });
  done({
    name: 'primary SIGSTOP (stale primary)',
    startedAt: s,
    endedAt: Date.now(),
    detail: `replica on ${newPort} promoted after ${promotedAfter} ms; old primary SIGCONTed, demoted by the sentinels ${Date.now() - contAt} ms later`,
  });

  // 2. One-way cut of a replication link: a replica of the new primary stops reading.
  await delay(gapMs);
  const cutPort = nodes.map((n) => n.port).find((p) => p !== newPort && p !== oldPort)!;
  s = Date.now();
  signal(cutPort, 'SIGSTOP');
  await delay(Math.max(3000, gapMs));
  signal(cutPort, 'SIGCONT');
  done({
    name: 'replica SIGSTOP (replication link cut)',
    startedAt: s,
    endedAt: Date.now(),
    detail: `replica on ${cutPort} stopped, then resumed`,
  });

  // 3. PgBouncer restart while workers commit.
  await delay(gapMs);
  let active = await whileActive();
  s = Date.now();
  await stack.pgbouncer!.restart();
  done({
    name: 'PgBouncer restart',
    startedAt: s,
    endedAt: Date.now(),
    detail: `immediate shutdown ${active}, then listening again`,
  });

  // 4. A worker SIGKILLed mid-batch.
  await delay(gapMs);
  active = await whileActive();
  s = Date.now();
  await stack.killAndRestartWorker(0);
  done({
    name: 'worker SIGKILL',
    startedAt: s,
    endedAt: Date.now(),
    detail: `worker 0 SIGKILLed ${active}, a new one started`,
  });
  return windows;
}

/** Attribute every send to the fault whose window (start to the next fault's start) it was made in. */
export function repliesByFault(windows: FaultWindow[], deliveries: Delivery[], endAt: number): FaultReplies[] {
  return windows.map((w, i) => {
    const until = windows[i + 1]?.startedAt ?? endAt;
    const replies: Record<string, number> = {};
    let refused = 0;
    let lastRefusal = 0;
    for (const d of deliveries) {
      for (const a of d.attempts) {
        const at = Date.parse(a.at);
        if (at < w.startedAt || at >= until) continue;
        const key = a.status === null ? 'none' : String(a.status);
        replies[key] = (replies[key] ?? 0) + 1;
        if (a.outcome !== 'success') {
          refused++;
          lastRefusal = Math.max(lastRefusal, at + a.durationMs);
        }
      }
    }
    return { name: w.name, replies, refused, refusedForMs: refused > 0 ? lastRefusal - w.startedAt : 0 };
  });
}
