/**
 * The live figures only the workers see (Get order latency, errors and rate, each process's breaker), merged from
 * the snapshots each worker lane writes to `merchantKeys(...).laneSnapshots` (apps/worker/src/lane-snapshot.ts). A
 * snapshot older than 3 of its intervals is a dead worker's: ignored, and removed.
 */
import type { RedisClient } from '@mcb/core/redis';

/** The merged figures of the live workers of one merchant; every figure null when no worker reported. */
export interface LaneFigures {
  /** Worker processes whose snapshot is live. */
  workers: number;
  /** The highest of the workers' Get order p99 over their window, in ms (an upper bound of the fleet's p99). */
  getOrderP99Ms: number | null;
  /** Outage-like failures per Get order call, 0..1, over the workers' windows. */
  getOrderErrorRate: number | null;
  /** Get order calls per second, all live workers together. */
  getOrderRate: number | null;
  /** The worst of the workers' breakers. */
  breaker: 'closed' | 'half-open' | 'open' | null;
}

interface Snapshot {
  windowMs: number;
  getOrders: number;
  getOrderErrors: number;
  getOrderP99Ms: number | null;
  breaker: 'closed' | 'half-open' | 'open';
}

export const NO_LANE_FIGURES: LaneFigures = {
  workers: 0,
  getOrderP99Ms: null,
  getOrderErrorRate: null,
  getOrderRate: null,
  breaker: null,
};

const BREAKER_RANK = { closed: 0, 'half-open': 1, open: 2 } as const;

/** Read and merge merchant key `key`'s live snapshots (Redis's clock decides what is live). */
export async function readLaneFigures(redis: RedisClient, key: string): Promise<LaneFigures> {
  const replies = await redis.pipeline().hgetall(key).time().exec();
  const [hErr, fields] = replies?.[0] ?? [new Error('no reply'), undefined];
  const [tErr, time] = replies?.[1] ?? [new Error('no reply'), undefined];
  if (hErr) throw hErr;
  if (tErr) throw tErr;
  const [sec, usec] = (time as [string, string]).map(Number) as [number, number];
  const nowMs = sec * 1000 + Math.floor(usec / 1000);
  const live: Snapshot[] = [];
  const dead: string[] = [];
  for (const [field, value] of Object.entries((fields ?? {}) as Record<string, string>)) {
    const space = value.indexOf(' ');
    const at = Number(value.slice(0, space));
    const snap = parseSnapshot(value.slice(space + 1));
    if (!snap || !Number.isFinite(at) || nowMs - at > snap.windowMs * 3) dead.push(field);
    else live.push(snap);
  }
  if (dead.length) await redis.hdel(key, ...dead).catch(() => undefined);
  return mergeSnapshots(live);
}

function parseSnapshot(json: string): Snapshot | undefined {
  try {
    const s = JSON.parse(json) as Partial<Snapshot>;
    if (typeof s.windowMs !== 'number' || s.windowMs <= 0 || typeof s.getOrders !== 'number') return undefined;
    if (typeof s.getOrderErrors !== 'number' || !(s.breaker! in BREAKER_RANK)) return undefined;
    return s as Snapshot;
  } catch {
    return undefined;
  }
}

export function mergeSnapshots(live: readonly Snapshot[]): LaneFigures {
  if (live.length === 0) return NO_LANE_FIGURES;
  const calls = live.reduce((n, s) => n + s.getOrders, 0);
  const errors = live.reduce((n, s) => n + s.getOrderErrors, 0);
  const p99s = live.map((s) => s.getOrderP99Ms).filter((v): v is number => typeof v === 'number');
  return {
    workers: live.length,
    getOrderP99Ms: p99s.length ? Math.max(...p99s) : null,
    getOrderErrorRate: calls > 0 ? errors / calls : null,
    getOrderRate: live.reduce((r, s) => r + (s.getOrders * 1000) / s.windowMs, 0),
    breaker: live.reduce<Snapshot['breaker']>(
      (worst, s) => (BREAKER_RANK[s.breaker] > BREAKER_RANK[worst] ? s.breaker : worst),
      'closed',
    ),
  };
}
