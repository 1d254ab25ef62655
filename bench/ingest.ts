/**
 * Ingest throughput and latency: distinct pre-encrypted callbacks sent to ONE ingest process, then to ingest on all
 * cores. Peak = closed loop with rising concurrency until throughput stops rising; latency target = open loop at half
 * the peak rate. The load generator shares the cores with ingest (and Redis): its CPU time is reported.
 */
import { join } from 'node:path';
import { prepareCallbacks, type BenchKeys } from './lib/callbacks.ts';
import { startIngest, REPO_ROOT } from './lib/ingest-process.ts';
import { closedLoop, openLoop, type LoadResult } from './lib/load.ts';
import { processTree, sampleMemory, treeCpuSeconds } from './lib/proc.ts';
import { profileSession, type ProfileSummary } from './lib/profile-summary.ts';
import { progress } from './lib/progress.ts';
import type { BenchRedis, FsyncStalls } from './lib/redis-server.ts';
import { metricValue } from '@mcb/core/metrics';
import { round, summarize, type LatencySummary } from './lib/stats.ts';

export interface IngestStep {
  connections: number;
  rps: number;
  p50: number;
  p99: number;
  /** CPU seconds per wall second used by ingest (1.0 = one full core). */
  ingestCpu: number;
  /** Same for the load generator. */
  generatorCpu: number;
}

export interface IngestResult {
  workers: number | 'all';
  processes: number;
  peak: { rps: number; connections: number; latencyMs: LatencySummary; ingestCpu: number; generatorCpu: number };
  halfPeak: {
    rate: number;
    achievedRps: number;
    latencyMs: LatencySummary;
    ingestCpu: number;
    generatorCpu: number;
    /** Replies that took 20 ms or more (the target's bound). */
    over20ms: number;
    /** Redis's AOF fsyncs of 5 ms or more while it ran (its latency monitor): what every reply of that moment waited for. */
    fsyncStalls: FsyncStalls;
    /**
     * Ingest's own event loop while it ran (prom-client's lag histogram, reset at the scrape before): how late it ran
     * its callbacks, in ms; and its major (mark-sweep) garbage collections. One process only: a cluster's aggregate
     * of these is not one loop's.
     */
    ingestLoop?: { lagP99Ms: number; lagMaxMs: number; majorGcs: number; majorGcMs: number };
  };
  steps: IngestStep[];
  /** Peak resident memory of ingest (all its processes), bytes. */
  peakRssBytes: number;
  /** Jobs found in the queue after the run vs. 2xx replies (each distinct callback must make one job). */
  jobsStored: number;
  accepted: number;
  failures: Record<string, number>;
  /** Requests per second ÷ RSA decryptions per second on the same number of cores. */
  ratio: number;
  /** Requests per ingest CPU-second ÷ decryptions per core-second: the ratio had ingest had its cores to itself. */
  ratioPerCpuSecond: number;
  profile?: ProfileSummary;
}

export interface IngestOptions {
  keys: BenchKeys;
  redis: BenchRedis;
  workers: number;
  /** RSA decryptions per second on the cores ingest may use (per core for 1 process, all cores for 0). */
  decryptsPerSecond: number;
  decryptsPerCore: number;
  stepSeconds: number;
  halfSeconds: number;
  maxConnections: number;
  logLevel: string;
  profile: boolean;
}

function addFailures(into: Record<string, number>, r: LoadResult): void {
  for (const [s, n] of Object.entries(r.statuses)) into[s] = (into[s] ?? 0) + n;
  if (r.errors) into.socket = (into.socket ?? 0) + r.errors;
}

export async function runIngest(o: IngestOptions): Promise<IngestResult> {
  await o.redis.flush();
  const prof = o.profile ? profileSession(join(REPO_ROOT, 'bench/results/profiles')) : undefined;
  const ingest = await startIngest({
    redisUrl: o.redis.url,
    privateKeyFile: o.keys.privateKeyFile,
    workers: o.workers,
    logLevel: o.logLevel,
    nodeArgs: prof?.nodeArgs ?? [],
  });
  const mem = sampleMemory(ingest.child.pid);
  const failures: Record<string, number> = {};
  let accepted = 0;
  try {
    const target = { host: ingest.host, port: ingest.port };
    const pool = (rate: number, seconds: number) =>
      prepareCallbacks({
        count: Math.ceil(Math.max(rate, 300) * seconds * 1.5) + 200,
        publicKeyPem: o.keys.publicKeyPem,
        ...target,
      });

    // Warm-up: JIT, connection pools, Redis script loading. Not counted.
    const warm = await closedLoop({
      ...target,
      connections: 4,
      durationMs: 1500,
      next: pool(o.decryptsPerSecond, 1.5).next,
    });
    accepted += warm.ok;
    addFailures(failures, warm);

    const steps: IngestStep[] = [];
    let best: { r: LoadResult; connections: number; ingestCpu: number; generatorCpu: number } | undefined;
    let flat = 0;
    for (let c = 1; c <= o.maxConnections; c *= 2) {
      // Enough callbacks for this step: it may well more than double the best so far (the first, one-connection step
      // runs while a cluster's processes still warm up), never beyond what the cores can decrypt.
      const prepared = pool(
        Math.min(o.decryptsPerSecond * 1.3, (best?.r.rps ?? o.decryptsPerSecond) * 2.6),
        o.stepSeconds,
      );
      const cpu0 = treeCpuSeconds(ingest.child.pid);
      const r = await closedLoop({ ...target, connections: c, durationMs: o.stepSeconds * 1000, next: prepared.next });
      const ingestCpu = (treeCpuSeconds(ingest.child.pid) - cpu0) / r.seconds;
      const generatorCpu = r.generatorCpuSeconds / r.seconds;
      accepted += r.ok;
      addFailures(failures, r);
      const lat = summarize(r.latencies);
      steps.push({
        connections: c,
        rps: round(r.rps),
        p50: round(lat.p50),
        p99: round(lat.p99),
        ingestCpu: round(ingestCpu),
        generatorCpu: round(generatorCpu),
      });
      progress(
        `  closed loop, ${String(c).padStart(3)} connections: ${r.rps.toFixed(0).padStart(6)} req/s, p50 ${lat.p50.toFixed(1)} ms, ` +
          `p99 ${lat.p99.toFixed(1)} ms, ingest CPU ${ingestCpu.toFixed(2)}, generator CPU ${generatorCpu.toFixed(2)}`,
      );
      if (!best || r.rps > best.r.rps * 1.03) {
        flat = best && r.rps < best.r.rps * 1.1 ? flat + 1 : 0;
        if (!best || r.rps > best.r.rps) best = { r, connections: c, ingestCpu, generatorCpu };
      } else {
        flat++;
      }
      if (flat >= 2) break;
    }
    if (!best) throw new Error('no measurement');

    const rate = best.r.rps / 2;
    const prepared = pool(rate, o.halfSeconds);
    const cpu0 = treeCpuSeconds(ingest.child.pid);
    const scrape = () =>
      fetch(ingest.metricsUrl).then(
        (r) => (r.ok ? r.text() : ''),
        () => '',
      );
    const before = o.workers === 1 ? await scrape() : ''; // also resets the event-loop lag histogram
    const halfFrom = Date.now();
    const half = await openLoop({
      ...target,
      rate,
      durationMs: o.halfSeconds * 1000,
      maxConnections: 256,
      next: prepared.next,
    });
    const halfIngestCpu = (treeCpuSeconds(ingest.child.pid) - cpu0) / half.seconds;
    accepted += half.ok;
    addFailures(failures, half);
    const halfLat = summarize(half.latencies);
    const fsyncStalls = await o.redis.fsyncStalls(halfFrom);
    const over20ms = half.latencies.filter((ms) => ms >= 20).length;
    const after = before ? await scrape() : '';
    const gc = (text: string, what: string) =>
      metricValue(text, `nodejs_gc_duration_seconds_${what}`, { kind: 'major' });
    const ingestLoop = after.includes('nodejs_eventloop_lag_max_seconds')
      ? {
          lagP99Ms: metricValue(after, 'nodejs_eventloop_lag_p99_seconds') * 1000,
          lagMaxMs: metricValue(after, 'nodejs_eventloop_lag_max_seconds') * 1000,
          majorGcs: gc(after, 'count') - gc(before, 'count'),
          majorGcMs: (gc(after, 'sum') - gc(before, 'sum')) * 1000,
        }
      : undefined;
    progress(
      `  open loop at ${rate.toFixed(0)} req/s (half of peak): p50 ${halfLat.p50.toFixed(1)} ms, p99 ${halfLat.p99.toFixed(1)} ms, ` +
        `max ${halfLat.max.toFixed(1)} ms, ${over20ms} of ${half.latencies.length} replies at 20 ms or more, ingest CPU ${halfIngestCpu.toFixed(2)}; ` +
        `Redis AOF fsync at 5 ms or more in ${fsyncStalls.seconds} of its seconds, worst ${fsyncStalls.worstMs} ms` +
        (ingestLoop
          ? `; ingest event loop lag p99 ${ingestLoop.lagP99Ms.toFixed(1)} ms, max ${ingestLoop.lagMaxMs.toFixed(1)} ms, ${ingestLoop.majorGcs} major GCs (${ingestLoop.majorGcMs.toFixed(0)} ms)`
          : ''),
    );

    const jobsStored = Number(await o.redis.admin.llen('mcb:callbacks:wait'));
    const memory = mem.stop();
    const processes = o.workers === 1 ? 1 : Math.max(1, processTree(ingest.child.pid).length - 1);
    await ingest.child.stop();
    const profile = prof?.collect();
    return {
      workers: o.workers === 0 ? 'all' : o.workers,
      processes,
      peak: {
        rps: best.r.rps,
        connections: best.connections,
        latencyMs: summarize(best.r.latencies),
        ingestCpu: best.ingestCpu,
        generatorCpu: best.generatorCpu,
      },
      halfPeak: {
        rate,
        achievedRps: half.rps,
        latencyMs: halfLat,
        ingestCpu: halfIngestCpu,
        generatorCpu: half.generatorCpuSeconds / half.seconds,
        over20ms,
        fsyncStalls,
        ...(ingestLoop ? { ingestLoop } : {}),
      },
      steps,
      peakRssBytes: memory.peak,
      jobsStored,
      accepted,
      failures,
      ratio: best.r.rps / o.decryptsPerSecond,
      ratioPerCpuSecond: best.r.rps / best.ingestCpu / o.decryptsPerCore,
      ...(profile ? { profile } : {}),
    };
  } finally {
    mem.stop();
    await ingest.child.stop();
  }
}
