/** The final table: limits, ingest, end to end, backlog, and the targets, as plain text. */
import type { BenchReport } from './run.ts';

const n0 = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? '-' : Math.round(v).toLocaleString('en-US'));
const ms = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? '-' : v < 10 ? v.toFixed(2) : v.toFixed(1));
const mib = (v: number | undefined) => (v === undefined ? '-' : `${(v / 2 ** 20).toFixed(1)} MiB`);

function grid(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n');
}

export function renderTable(r: BenchReport): string {
  const out: string[] = [];
  out.push(`merchant-callbacks benchmark  ${r.at}  ${r.machine.cores} cores (${r.machine.cpu}), Node ${r.machine.node}${r.machine.quick ? '  [--quick]' : ''}`);
  const { rsa, postgres, redis, disk, tracingOff } = r.limits;
  if (rsa || postgres || redis) {
    out.push('', 'LIMITS (this machine, this run)');
    const rows = [['measure', 'value']];
    if (rsa) {
      rows.push([`RSA-${rsa.bits} private decrypt, one core`, `${n0(rsa.perCore)}/s`]);
      rows.push([`RSA-${rsa.bits} private decrypt, ${rsa.cores} cores`, `${n0(rsa.allCores)}/s`]);
    }
    if (postgres) rows.push([`Postgres credit tx (plain SQL, pg, ${postgres.concurrency} clients)`, `${n0(postgres.transactionsPerSecond)}/s`]);
    if (redis) {
      rows.push(['Redis PING, one at a time', `${n0(redis.pingSequential)}/s`]);
      rows.push([`Redis PING, ${redis.inFlight} in flight`, `${n0(redis.pingConcurrent)}/s`]);
      rows.push([`Redis fsynced SET (AOF always), ${redis.inFlight} in flight`, `${n0(redis.durableWritesConcurrent)}/s`]);
    }
    if (disk) {
      rows.push(['disk fdatasync, 2 KiB append, p50 / p99 / max', `${ms(disk.fdatasyncMs.p50)} / ${ms(disk.fdatasyncMs.p99)} / ${ms(disk.fdatasyncMs.max)} ms`]);
    }
    if (tracingOff) rows.push(['tracing helpers while off, per callback (ingest)', `${n0(tracingOff.nsPerCallback)} ns`]);
    out.push(grid(rows));
  }
  if (r.ingest) {
    out.push('', 'INGEST (distinct pre-encrypted callbacks; load generator on the same cores)');
    const rows = [['processes', 'peak req/s', 'conns', 'p50 ms', 'p99 ms', 'max ms', '½-peak p99', 'ingest CPU', 'loadgen CPU', 'peak RSS', 'ratio', 'ratio/CPU-s']];
    for (const x of [r.ingest.one, r.ingest.all]) {
      if (!x) continue;
      rows.push([
        String(x.processes), n0(x.peak.rps), String(x.peak.connections), ms(x.peak.latencyMs.p50), ms(x.peak.latencyMs.p99), ms(x.peak.latencyMs.max),
        ms(x.halfPeak.latencyMs.p99), x.peak.ingestCpu.toFixed(2), x.peak.generatorCpu.toFixed(2), mib(x.peakRssBytes), x.ratio.toFixed(2), x.ratioPerCpuSecond.toFixed(2),
      ]);
    }
    out.push(grid(rows));
    for (const x of [r.ingest.one, r.ingest.all]) {
      if (!x) continue;
      const fails = Object.entries(x.failures).map(([k, v]) => `${k}: ${v}`).join(', ') || 'none';
      const stalls = x.halfPeak.fsyncStalls;
      out.push(
        `  ${x.processes} process(es): half-peak ${n0(x.halfPeak.rate)} req/s → p50 ${ms(x.halfPeak.latencyMs.p50)} ms, max ${ms(x.halfPeak.latencyMs.max)} ms, ` +
          `${x.halfPeak.over20ms} of ${x.halfPeak.latencyMs.count} replies at 20 ms or more; Redis AOF fsync at 5 ms or more in ${stalls.seconds} s, worst ${stalls.worstMs} ms; ` +
          (x.halfPeak.ingestLoop ? `ingest event loop lag max ${ms(x.halfPeak.ingestLoop.lagMaxMs)} ms, ${x.halfPeak.ingestLoop.majorGcs} major GCs; ` : '') +
          `jobs stored ${x.jobsStored}/${x.accepted} accepted; non-2xx ${fails}`,
      );
    }
    const prof = r.ingest.one?.profile;
    if (prof) {
      out.push('  ingest CPU profile (one process, whole run), self time by category:');
      out.push(`    ${prof.byCategory.slice(0, 10).map((c) => `${c.category} ${(c.share * 100).toFixed(1)}%`).join(', ')}`);
    }
  }
  if (r.e2e) {
    const e = r.e2e;
    out.push('', `END TO END (sandbox → ingest → worker → Postgres; ${e.inFlight} orders in flight)`);
    out.push(grid([
      ['orders', 'credits/s', 'p50 ms', 'p99 ms', 'max ms', 'CPU ingest/worker/sandbox', 'failed attempts', 'ratio'],
      [n0(e.credited), n0(e.creditsPerSecond), n0(e.latencyMs.p50), n0(e.latencyMs.p99), n0(e.latencyMs.max),
        `${e.cpu.ingest.toFixed(2)}/${e.cpu.worker.toFixed(2)}/${e.cpu.sandboxAndDriver.toFixed(2)}`, String(e.failedAttempts), e.ratio.toFixed(2)],
    ]));
  }
  const wp = r.e2e?.workerProfile;
  if (wp) {
    out.push('  worker CPU profile (end to end), self time by category:');
    out.push(`    ${wp.byCategory.slice(0, 10).map((c) => `${c.category} ${(c.share * 100).toFixed(1)}%`).join(', ')}`);
  }
  if (r.search) {
    const x = r.search;
    out.push('', `SEARCH (GET /api/callbacks through the console's routes; ${n0(x.rows)} receipts and arrivals, filled in ${n0(x.fillSeconds)} s; ${x.queries} queries per filter; load average ${x.loadAverage.before.toFixed(1)} → ${x.loadAverage.after.toFixed(1)})`);
    const rows = [['filter', 'rows/page', 'p50 ms', 'p99 ms', 'max ms', 'query alone p50/p99 ms']];
    for (const f of x.filters) rows.push([f.name, n0(f.rowsPerPage), ms(f.latencyMs.p50), ms(f.latencyMs.p99), ms(f.latencyMs.max), f.queryMs ? `${ms(f.queryMs.p50)} / ${ms(f.queryMs.p99)}` : '-']);
    out.push(grid(rows));
  }
  if (r.backlog) {
    const b = r.backlog;
    out.push('', 'BACKLOG (BullMQ addBulk with the contract ids/options; one worker drains it)');
    out.push(grid([
      ['jobs', 'Redis B/job', 'enqueue s', 'drained', 'drain/s', 'full drain s', 'RSS start', 'RSS mid', 'RSS end', 'RSS /1k jobs'],
      [n0(b.jobs), n0(b.redisBytesPerJob), b.enqueueSeconds.toFixed(1), `${n0(b.drained)}${b.complete ? '' : ' (time box)'}`, n0(b.drainPerSecond),
        `${n0(b.projectedFullDrainSeconds)}${b.complete ? '' : ' (proj.)'}`, mib(b.rss.startBytes), mib(b.rss.middleBytes), mib(b.rss.endBytes), `${(b.rss.slopeBytesPerKiloJob / 1024).toFixed(0)} KiB`],
    ]));
  }
  if (r.targets.length) {
    out.push('', 'TARGETS (reported, not asserted)');
    out.push(grid([['target', 'wanted', 'reached', ''], ...r.targets.map((t) => [t.name, t.target, t.value, t.met === null ? '' : t.met ? 'met' : 'MISSED'])]));
  }
  return out.join('\n');
}
