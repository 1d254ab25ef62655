/**
 * `pnpm bench`: the pipeline's throughput and latency as ratios to this machine's own limits, measured in the same
 * run. Progress goes to stderr, the table to stdout, everything to bench/results/latest.json.
 *
 *   pnpm bench [--quick] [--only limits,ingest,compare,e2e,backlog,search,fairness] [--compare-orders N] [--compare-delays 0,200,500,1000]
 *              [--compare-rounds N] [--compare-settlement] [--pipeline-env KEY=VALUE,KEY=VALUE]
 *              [--search-rows N] [--search-queries N] [--e2e-orders N] [--e2e-in-flight N] [--backlog N]
 *              [--backlog-drain-seconds S | --backlog-drain-all] [--step-seconds S] [--half-seconds S]
 *              [--limit-seconds S] [--bits 2048] [--concurrency 16] [--log-level info] [--profile] [--keep-db]
 *              [--fairness-flood N] [--fairness-rate R] [--fairness-a-rps N] [--fairness-workers N]
 *              [--fairness-solo-seconds S] [--fairness-outage-seconds S] [--fairness-baseline N]
 *              [--fairness-rows a-solo,b-solo,c-solo,together,outage,single-queue]
 *   (fairness runs only when named in --only: `pnpm bench --only fairness`)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runBacklog, type BacklogResult } from './backlog.ts';
import {
  median,
  roundsOf,
  runCompare,
  runsOf,
  SYSTEM_LABELS,
  type CompareRound,
  type CompareRow,
  type SystemRun,
} from './compare.ts';
import { runE2e, type E2eResult } from './e2e.ts';
import { fairnessTargets, runFairness, type FairnessResult, type RowKind } from './fairness.ts';
import { runIngest, type IngestResult } from './ingest.ts';
import { runSearch, type SearchResult } from './search.ts';
import { measureDisk, type DiskLimit } from './limits/disk.ts';
import { measurePostgres, type PostgresLimit } from './limits/postgres.ts';
import { measureRedis, type RedisLimit } from './limits/redis.ts';
import { decryptsPerCpuSecond, measureRsa, type RsaLimit } from './limits/rsa.ts';
import { measureTracingOff, type TracingOffCost } from './limits/tracing.ts';
import { createKeys } from './lib/callbacks.ts';
import { createBenchDatabase } from './lib/database.ts';
import { REPO_ROOT } from './lib/ingest-process.ts';
import { progress, section } from './lib/progress.ts';
import { startRedis } from './lib/redis-server.ts';
import { renderTable } from './table.ts';

const { values: a } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    'e2e-orders': { type: 'string' },
    'e2e-in-flight': { type: 'string' },
    'compare-orders': { type: 'string' },
    'compare-delays': { type: 'string' },
    'compare-rounds': { type: 'string' },
    'compare-settlement': { type: 'boolean', default: false },
    'pipeline-env': { type: 'string' },
    backlog: { type: 'string' },
    'search-rows': { type: 'string' },
    'search-queries': { type: 'string' },
    'backlog-drain-seconds': { type: 'string' },
    'backlog-drain-all': { type: 'boolean', default: false },
    'step-seconds': { type: 'string' },
    'half-seconds': { type: 'string' },
    'limit-seconds': { type: 'string' },
    bits: { type: 'string', default: '2048' },
    concurrency: { type: 'string', default: '16' },
    'log-level': { type: 'string', default: 'info' },
    profile: { type: 'boolean', default: false },
    'keep-db': { type: 'boolean', default: false },
    'fairness-flood': { type: 'string' },
    'fairness-rate': { type: 'string' },
    'fairness-a-rps': { type: 'string' },
    'fairness-workers': { type: 'string' },
    'fairness-solo-seconds': { type: 'string' },
    'fairness-outage-seconds': { type: 'string' },
    'fairness-baseline': { type: 'string' },
    'fairness-rows': { type: 'string' },
  },
});

const quick = a.quick;
const num = (v: string | undefined, full: number, q: number) => (v === undefined ? (quick ? q : full) : Number(v));
const opts = {
  only: new Set((a.only ?? 'limits,ingest,compare,e2e,backlog,search').split(',')),
  compareOrders: num(a['compare-orders'], 3000, 1000),
  compareDelaysMs: (a['compare-delays'] ?? '0,200,500,1000').split(',').map(Number),
  /** Lean and pipeline this many times at each latency, alternated; the ratios and targets are the medians. */
  compareRounds: num(a['compare-rounds'], 1, 1),
  compareSettlement: a['compare-settlement'],
  /** Settings handed to the compare's ingest and worker processes (to try a change by configuration alone). */
  pipelineEnv: Object.fromEntries(
    (a['pipeline-env'] ?? '')
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  ) as Record<string, string>,
  e2eOrders: num(a['e2e-orders'], 6000, 1000),
  e2eInFlight: num(a['e2e-in-flight'], 64, 64),
  backlog: num(a.backlog, 200_000, 20_000),
  searchRows: num(a['search-rows'], 1_000_000, 100_000),
  searchQueries: num(a['search-queries'], 200, 50),
  backlogDrainSeconds: a['backlog-drain-all'] ? Infinity : num(a['backlog-drain-seconds'], 60, 15),
  stepSeconds: num(a['step-seconds'], 4, 1.5),
  halfSeconds: num(a['half-seconds'], 10, 4),
  limitSeconds: num(a['limit-seconds'], 4, 1.5),
  bits: Number(a.bits),
  concurrency: Number(a.concurrency),
  logLevel: a['log-level'] ?? 'info',
  profile: a.profile,
  fairness: {
    flood: num(a['fairness-flood'], 30_000, 6000),
    rate: num(a['fairness-rate'], 20, 20),
    aRps: num(a['fairness-a-rps'], 1000, 1000),
    workers: num(a['fairness-workers'], 2, 2),
    soloSeconds: num(a['fairness-solo-seconds'], 20, 10),
    outageSeconds: num(a['fairness-outage-seconds'], 60, 15),
    baseline: num(a['fairness-baseline'], 10_000, 3000),
    rows: a['fairness-rows']?.split(',') as RowKind[] | undefined,
  },
};

/** Everything the run measured; written to bench/results/latest.json. */
export interface BenchReport {
  at: string;
  machine: { cores: number; cpu: string; memoryBytes: number; node: string; quick: boolean };
  options: Omit<typeof opts, 'only'> & { only: string[] };
  limits: {
    rsa?: RsaLimit;
    rsaCpu?: { decryptsPerCpuSecond: number; cpuMsPerDecrypt: number };
    postgres?: PostgresLimit;
    redis?: RedisLimit;
    disk?: DiskLimit;
    tracingOff?: TracingOffCost;
  };
  ingest?: { one?: IngestResult; all?: IngestResult };
  compare?: CompareRow[];
  e2e?: E2eResult;
  backlog?: BacklogResult;
  search?: SearchResult;
  fairness?: FairnessResult;
  targets: { name: string; target: string; value: string; met: boolean | null }[];
}

const report: BenchReport = {
  at: new Date().toISOString(),
  machine: {
    cores: availableParallelism(),
    cpu: cpus()[0]?.model ?? 'unknown',
    memoryBytes: totalmem(),
    node: process.version,
    quick,
  },
  options: { ...opts, only: [...opts.only] },
  limits: {},
  targets: [],
};

const cleanups: (() => Promise<unknown> | unknown)[] = [];
let interrupted = false;
process.once('SIGINT', () => {
  interrupted = true;
  progress('interrupted: cleaning up');
  void cleanup().then(() => process.exit(130));
});
async function cleanup(): Promise<void> {
  for (const c of cleanups.splice(0).reverse()) {
    try {
      await c();
    } catch (e) {
      progress(`cleanup: ${String(e)}`);
    }
  }
}

try {
  section(`setup (${quick ? 'quick' : 'full'} sizes; ${report.machine.cores} cores, ${report.machine.cpu})`);
  const keys = createKeys(opts.bits);
  cleanups.push(keys.remove);
  const redis = await startRedis();
  cleanups.push(redis.close);
  progress(`own redis-server on port ${redis.port} (appendonly yes, appendfsync always)`);
  const db = await createBenchDatabase();
  if (!a['keep-db']) cleanups.push(db.drop);
  progress(`own database ${db.name} (migrated)`);

  const need = (what: string) => opts.only.has(what);
  // The ingest and e2e ratios need the limits, the compare the RSA limit; measure them whenever those run.
  if (need('limits') || need('ingest') || need('e2e') || need('compare')) {
    section('limits of this machine');
    report.limits.rsa = await measureRsa({
      privateKeyFile: keys.privateKeyFile,
      publicKeyPem: keys.publicKeyPem,
      bits: opts.bits,
      seconds: opts.limitSeconds,
    });
    progress(
      `RSA-${opts.bits} private decrypt: ${report.limits.rsa.perCore.toFixed(0)}/s on one core, ${report.limits.rsa.allCores.toFixed(0)}/s on ${report.limits.rsa.cores}`,
    );
    const perCpuSecond = decryptsPerCpuSecond(
      readFileSync(keys.privateKeyFile, 'utf8'),
      keys.publicKeyPem,
      Math.min(2000, opts.limitSeconds * 1000),
    );
    report.limits.rsaCpu = { decryptsPerCpuSecond: perCpuSecond, cpuMsPerDecrypt: 1000 / perCpuSecond };
    progress(
      `RSA-${opts.bits} private decrypt: ${perCpuSecond.toFixed(0)} per CPU-second of one thread, ${report.limits.rsaCpu.cpuMsPerDecrypt.toFixed(3)} ms of CPU each (the unit of CPU per credit)`,
    );
    // The compare alone needs only the RSA figure.
    if (need('limits') || need('ingest') || need('e2e')) {
      report.limits.postgres = await measurePostgres({
        databaseUrl: db.url,
        seconds: opts.limitSeconds,
        concurrency: opts.concurrency,
        maxTransactions: quick ? 20_000 : 60_000,
      });
      progress(
        `Postgres credit transaction (plain SQL, ${opts.concurrency} clients): ${report.limits.postgres.transactionsPerSecond.toFixed(0)}/s`,
      );
      report.limits.redis = await measureRedis({
        url: redis.url,
        seconds: Math.min(2, opts.limitSeconds),
        inFlight: opts.concurrency,
      });
      await redis.flush();
      progress(
        `Redis: PING ${report.limits.redis.pingSequential.toFixed(0)}/s one at a time, ${report.limits.redis.pingConcurrent.toFixed(0)}/s with ${opts.concurrency} in flight; ` +
          `fsynced SET ${report.limits.redis.durableWritesConcurrent.toFixed(0)}/s with ${opts.concurrency} in flight`,
      );
      report.limits.disk = measureDisk({ dir: redis.dir, seconds: Math.min(3, opts.limitSeconds) });
      const disk = report.limits.disk;
      progress(
        `disk fdatasync of a 2 KiB append (Redis's AOF directory): p50 ${disk.fdatasyncMs.p50.toFixed(2)} ms, p99 ${disk.fdatasyncMs.p99.toFixed(2)} ms, ` +
          `max ${disk.fdatasyncMs.max.toFixed(1)} ms; ${disk.over20ms} of ${disk.syncs} at 20 ms or more`,
      );
    }
  }

  const rsa = report.limits.rsa;
  if (need('ingest') && rsa) {
    report.limits.tracingOff = await measureTracingOff(quick ? 100_000 : 500_000);
    progress(
      `tracing helpers while tracing is off: ${report.limits.tracingOff.nsPerCallback.toFixed(0)} ns per callback`,
    );
    section('ingest: one process (INGEST_WORKERS=1)');
    const base = {
      keys,
      redis,
      stepSeconds: opts.stepSeconds,
      halfSeconds: opts.halfSeconds,
      maxConnections: 64,
      logLevel: opts.logLevel,
      decryptsPerCore: rsa.perCore,
    };
    const one = await runIngest({ ...base, workers: 1, decryptsPerSecond: rsa.perCore, profile: opts.profile });
    section(`ingest: all cores (INGEST_WORKERS=0, ${rsa.cores} processes)`);
    const all = await runIngest({ ...base, workers: 0, decryptsPerSecond: rsa.allCores, profile: false });
    report.ingest = { one, all };
  }

  if (need('compare') && report.limits.rsaCpu) {
    const envNote = Object.keys(opts.pipelineEnv).length
      ? `; pipeline env ${Object.entries(opts.pipelineEnv)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}`
      : '';
    section(
      `pipeline vs the lean in-request receiver: ${opts.compareOrders} pay-ins + 10 % duplicates, 64 in flight, Get order ${opts.compareDelaysMs.join(' / ')} ms${opts.compareRounds > 1 ? `, ${opts.compareRounds} alternated rounds each (medians)` : ''}${envNote}`,
    );
    progress(`  baseline: ${SYSTEM_LABELS.lean}`);
    if (opts.compareSettlement) progress(`  also: ${SYSTEM_LABELS.settlement}`);
    report.compare = await runCompare({
      keys,
      redis,
      databaseUrl: db.url,
      orders: opts.compareOrders,
      inFlight: 64,
      delaysMs: opts.compareDelaysMs,
      logLevel: opts.logLevel,
      rsaCpuMsPerDecrypt: report.limits.rsaCpu.cpuMsPerDecrypt,
      withSettlement: opts.compareSettlement,
      rounds: opts.compareRounds,
      pipelineEnv: opts.pipelineEnv,
      profile: opts.profile,
    });
  }

  if (need('e2e') && report.limits.postgres) {
    section(`end to end: ${opts.e2eOrders} orders, sandbox → ingest → worker → Postgres`);
    report.e2e = await runE2e({
      keys,
      redis,
      databaseUrl: db.url,
      orders: opts.e2eOrders,
      inFlight: opts.e2eInFlight,
      concurrency: opts.concurrency,
      logLevel: opts.logLevel,
      postgresTps: report.limits.postgres.transactionsPerSecond,
      profile: opts.profile,
    });
  }

  if (need('backlog')) {
    section(`backlog: ${opts.backlog} queued events`);
    report.backlog = await runBacklog({
      redis,
      databaseUrl: db.url,
      jobs: opts.backlog,
      drainSeconds: opts.backlogDrainSeconds,
      concurrency: opts.concurrency,
      logLevel: opts.logLevel,
    });
  }

  if (need('search')) {
    section(
      `search: GET /api/callbacks on ${opts.searchRows.toLocaleString('en-US')} receipts and arrivals, ${opts.searchQueries} queries per filter`,
    );
    // Its own database: the other phases' tables stay small, and 1M rows do not slow them.
    const searchDb = await createBenchDatabase();
    try {
      report.search = await runSearch({
        databaseUrl: searchDb.url,
        rows: opts.searchRows,
        queries: opts.searchQueries,
      });
    } finally {
      if (!a['keep-db']) await searchDb.drop();
    }
  }

  if (need('fairness')) {
    const f = opts.fairness;
    section(
      `fairness: A floods ${f.flood} pay-ins (+10 %) at 1,000 ms of Get order (getOrderRps ${f.aRps}); B and C send ${f.rate}/s each at 50 ms; ${f.workers} worker processes`,
    );
    report.fairness = await runFairness({
      ...f,
      redis,
      databaseUrl: db.url,
      aDelayMs: 1000,
      bcDelayMs: 50,
      bcRps: 200,
      logLevel: opts.logLevel,
    });
  }

  report.targets = targets(report);
  const file = join(REPO_ROOT, 'bench/results/latest.json');
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`\n${renderTable(report)}\n`);
  progress(`written ${file}`);
} catch (e) {
  if (!interrupted) {
    console.error(e);
    process.exitCode = 1;
  }
} finally {
  await cleanup();
}

function targets(r: BenchReport): BenchReport['targets'] {
  const t: BenchReport['targets'] = [];
  const one = r.ingest?.one;
  if (one) {
    t.push({ name: 'ingest.ratio', target: '>= 0.8', value: one.ratio.toFixed(2), met: one.ratio >= 0.8 });
    // Beside it, the slowest AOF fsync Redis recorded in that run: a reply can be no faster than the fsync it waits for.
    const stall = one.halfPeak.fsyncStalls.seconds ? ` (worst Redis fsync ${one.halfPeak.fsyncStalls.worstMs} ms)` : '';
    t.push({
      name: 'ingest p99 at half of peak',
      target: '< 20 ms',
      value: `${one.halfPeak.latencyMs.p99.toFixed(1)} ms${stall}`,
      met: one.halfPeak.latencyMs.p99 < 20,
    });
  }
  const off = r.limits.tracingOff;
  if (off && r.limits.rsa) {
    // "Zero cost when off": below 1 % of the one decrypt every callback needs, far inside the ingest peak's noise.
    const share = off.nsPerCallback / (1e9 / r.limits.rsa.perCore);
    t.push({
      name: 'tracing off: cost per callback',
      target: '< 1 % of a decrypt',
      value: `${(share * 100).toFixed(2)} %`,
      met: share < 0.01,
    });
  }
  // Issue 41's targets, against the lean in-request receiver of the same run (medians over --compare-rounds).
  const at = (ms: number) => r.compare?.find((c) => c.getOrderDelayMs === ms);
  const med = (c: CompareRow, f: (x: CompareRound) => number) => median(roundsOf(c).map(f));
  const over = (c: CompareRow) => (c.rounds ? ` (median of ${c.rounds.length} rounds)` : '');
  /** "pipeline / lean" of one figure, each the median over the rounds. */
  const both = (c: CompareRow, f: (s: SystemRun) => number, digits: number) =>
    `${med(c, (x) => f(x.pipeline)).toFixed(digits)} / ${med(c, (x) => f(x.lean)).toFixed(digits)}`;
  const c0 = at(0);
  if (c0) {
    t.push({
      name: 'CPU per credit, pipeline ÷ lean @0 ms',
      target: '<= 0.8',
      value: `${both(c0, (s) => s.cpuMsPerCredit.total, 2)} ms, ratio ${c0.cpuRatio.toFixed(2)}${over(c0)}`,
      met: c0.cpuRatio <= 0.8,
    });
    const decrypts = med(c0, (x) => x.pipeline.rsaDecryptsPerCredit);
    t.push({
      name: 'pipeline CPU per credit in RSA decrypts @0 ms (stretch)',
      target: '<= 3',
      value: `${decrypts.toFixed(2)} (lean ${med(c0, (x) => x.lean.rsaDecryptsPerCredit).toFixed(2)})${over(c0)}`,
      met: decrypts <= 3,
    });
    t.push({
      name: 'credits/s, pipeline ÷ lean @0 ms',
      target: '>= 1.2',
      value: `${both(c0, (s) => s.creditsPerSecond, 0)}, ratio ${c0.vsLean.toFixed(2)}${over(c0)}`,
      met: c0.vsLean >= 1.2,
    });
  }
  const c200 = at(200);
  if (c200)
    t.push({
      name: 'credits/s, pipeline ÷ lean @200 ms',
      target: '>= 3',
      value: `${both(c200, (s) => s.creditsPerSecond, 0)}, ratio ${c200.vsLean.toFixed(2)}${over(c200)}`,
      met: c200.vsLean >= 3,
    });
  // Throughput that does not care how slow Get order is: the adaptive limit, no setting changed between the runs.
  const c500 = at(500);
  if (c0 && c500) {
    const rate = (c: CompareRow) => med(c, (x) => x.pipeline.creditsPerSecond);
    const ratio = rate(c500) / rate(c0);
    t.push({
      name: 'pipeline credits/s @500 ms ÷ @0 ms',
      target: '>= 0.8',
      value: ratio.toFixed(2),
      met: ratio >= 0.8,
    });
  }
  if (r.compare?.length) {
    const runs = r.compare.flatMap(runsOf);
    const twice = runs.reduce((s, x) => s + x.verified.creditedTwice + x.verified.pairsTwice, 0);
    const failed = runs.filter((x) => !x.verified.ok).length;
    t.push({
      name: 'compare: nothing credited twice, every order credited',
      target: '0',
      value: `${twice} twice; ${failed} of ${runs.length} runs failed the check`,
      met: twice === 0 && failed === 0,
    });
  }
  if (r.e2e) t.push({ name: 'e2e.ratio', target: '>= 0.5', value: r.e2e.ratio.toFixed(2), met: r.e2e.ratio >= 0.5 });
  if (r.backlog) {
    t.push({
      name: 'Redis memory per waiting job',
      target: '< 2 KiB',
      value: `${(r.backlog.redisBytesPerJob / 1024).toFixed(2)} KiB`,
      met: r.backlog.redisBytesPerJob < 2048,
    });
    t.push({
      name: 'worker RSS flat while draining',
      target: 'flat',
      value: `${(r.backlog.rss.slopeBytesPerKiloJob / 1024).toFixed(0)} KiB per 1000 jobs`,
      met: r.backlog.rss.flat,
    });
  }
  if (r.fairness) t.push(...fairnessTargets(r.fairness));
  if (r.search) {
    const worst = r.search.filters.reduce((w, f) => (f.latencyMs.p99 > w.latencyMs.p99 ? f : w));
    t.push({
      name: `search p99 on ${r.search.rows.toLocaleString('en-US')} receipts (worst filter: ${worst.name})`,
      target: '< 100 ms',
      value: `${worst.latencyMs.p99.toFixed(1)} ms`,
      met: worst.latencyMs.p99 < 100,
    });
  }
  return t;
}
