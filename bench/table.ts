/** The final table: limits, ingest, end to end, backlog, and the targets, as plain text. */
import type { BenchReport } from './run.ts';
import { runsOf, type CompareRound } from './compare.ts';

const n0 = (v: number | undefined) =>
  v === undefined || !Number.isFinite(v) ? '-' : Math.round(v).toLocaleString('en-US');
const ms = (v: number | undefined) =>
  v === undefined || !Number.isFinite(v) ? '-' : v < 10 ? v.toFixed(2) : v.toFixed(1);
const mib = (v: number | undefined) => (v === undefined ? '-' : `${(v / 2 ** 20).toFixed(1)} MiB`);

function grid(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '))
    .join('\n');
}

export function renderTable(r: BenchReport): string {
  const out: string[] = [];
  out.push(
    `merchant-callbacks benchmark  ${r.at}  ${r.machine.cores} cores (${r.machine.cpu}), Node ${r.machine.node}${r.machine.quick ? '  [--quick]' : ''}`,
  );
  const { rsa, postgres, redis, disk, tracingOff } = r.limits;
  if (rsa || postgres || redis) {
    out.push('', 'LIMITS (this machine, this run)');
    const rows = [['measure', 'value']];
    if (rsa) {
      rows.push([`RSA-${rsa.bits} private decrypt, one core`, `${n0(rsa.perCore)}/s`]);
      rows.push([`RSA-${rsa.bits} private decrypt, ${rsa.cores} cores`, `${n0(rsa.allCores)}/s`]);
    }
    if (postgres)
      rows.push([
        `Postgres credit tx (plain SQL, pg, ${postgres.concurrency} clients)`,
        `${n0(postgres.transactionsPerSecond)}/s`,
      ]);
    if (redis) {
      rows.push(['Redis PING, one at a time', `${n0(redis.pingSequential)}/s`]);
      rows.push([`Redis PING, ${redis.inFlight} in flight`, `${n0(redis.pingConcurrent)}/s`]);
      rows.push([
        `Redis fsynced SET (AOF always), ${redis.inFlight} in flight`,
        `${n0(redis.durableWritesConcurrent)}/s`,
      ]);
    }
    if (disk) {
      rows.push([
        'disk fdatasync, 2 KiB append, p50 / p99 / max',
        `${ms(disk.fdatasyncMs.p50)} / ${ms(disk.fdatasyncMs.p99)} / ${ms(disk.fdatasyncMs.max)} ms`,
      ]);
    }
    if (tracingOff)
      rows.push(['tracing helpers while off, per callback (ingest)', `${n0(tracingOff.nsPerCallback)} ns`]);
    out.push(grid(rows));
  }
  if (r.ingest) {
    out.push('', 'INGEST (distinct pre-encrypted callbacks; load generator on the same cores)');
    const rows = [
      [
        'processes',
        'peak req/s',
        'conns',
        'p50 ms',
        'p99 ms',
        'max ms',
        '½-peak p99',
        'ingest CPU',
        'loadgen CPU',
        'peak RSS',
        'ratio',
        'ratio/CPU-s',
      ],
    ];
    for (const x of [r.ingest.one, r.ingest.all]) {
      if (!x) continue;
      rows.push([
        String(x.processes),
        n0(x.peak.rps),
        String(x.peak.connections),
        ms(x.peak.latencyMs.p50),
        ms(x.peak.latencyMs.p99),
        ms(x.peak.latencyMs.max),
        ms(x.halfPeak.latencyMs.p99),
        x.peak.ingestCpu.toFixed(2),
        x.peak.generatorCpu.toFixed(2),
        mib(x.peakRssBytes),
        x.ratio.toFixed(2),
        x.ratioPerCpuSecond.toFixed(2),
      ]);
    }
    out.push(grid(rows));
    for (const x of [r.ingest.one, r.ingest.all]) {
      if (!x) continue;
      const fails =
        Object.entries(x.failures)
          .map(([k, v]) => `${k}: ${v}`)
          .join(', ') || 'none';
      const stalls = x.halfPeak.fsyncStalls;
      out.push(
        `  ${x.processes} process(es): half-peak ${n0(x.halfPeak.rate)} req/s → p50 ${ms(x.halfPeak.latencyMs.p50)} ms, max ${ms(x.halfPeak.latencyMs.max)} ms, ` +
          `${x.halfPeak.over20ms} of ${x.halfPeak.latencyMs.count} replies at 20 ms or more; Redis AOF fsync at 5 ms or more in ${stalls.seconds} s, worst ${stalls.worstMs} ms; ` +
          (x.halfPeak.ingestLoop
            ? `ingest event loop lag max ${ms(x.halfPeak.ingestLoop.lagMaxMs)} ms, ${x.halfPeak.ingestLoop.majorGcs} major GCs; `
            : '') +
          `jobs stored ${x.jobsStored}/${x.accepted} accepted; non-2xx ${fails}`,
      );
    }
    const prof = r.ingest.one?.profile;
    if (prof) {
      out.push('  ingest CPU profile (one process, whole run), self time by category:');
      out.push(
        `    ${prof.byCategory
          .slice(0, 10)
          .map((c) => `${c.category} ${(c.share * 100).toFixed(1)}%`)
          .join(', ')}`,
      );
    }
  }
  if (r.compare?.length) {
    const unit = r.limits.rsaCpu ? `; 1 RSA decrypt = ${r.limits.rsaCpu.cpuMsPerDecrypt.toFixed(3)} CPU ms` : '';
    out.push(
      '',
      `COMPARE (pipeline vs the LEAN in-request receiver, the baseline: pg + undici, one transaction; CPU of every process the system uses, Postgres and Redis included${unit})`,
    );
    const at0 = r.compare.find((c) => c.getOrderDelayMs === 0)?.pipeline.creditsPerSecond;
    const rows = [
      [
        'Get order',
        'lean cr/s',
        'pipeline cr/s',
        '÷',
        'CPU ms/cr lean',
        'pipeline',
        '÷',
        'RSA decrypts/cr lean',
        'pipeline',
        'pipeline ÷ @0',
        'checks',
      ],
    ];
    for (const c of r.compare) {
      const ok = runsOf(c).every((x) => x.verified.ok);
      rows.push([
        `${c.getOrderDelayMs} ms`,
        n0(c.lean.creditsPerSecond),
        n0(c.pipeline.creditsPerSecond),
        c.vsLean.toFixed(2),
        c.lean.cpuMsPerCredit.total.toFixed(2),
        c.pipeline.cpuMsPerCredit.total.toFixed(2),
        c.cpuRatio.toFixed(2),
        c.lean.rsaDecryptsPerCredit.toFixed(2),
        c.pipeline.rsaDecryptsPerCredit.toFixed(2),
        at0 ? (c.pipeline.creditsPerSecond / at0).toFixed(2) : '-',
        ok ? 'ok' : 'FAILED',
      ]);
    }
    out.push(grid(rows));
    for (const c of r.compare.filter((x) => x.rounds)) {
      const list = (f: (x: CompareRound) => number) => c.rounds!.map((x) => f(x).toFixed(2)).join(', ');
      out.push(
        `  @${c.getOrderDelayMs} ms, ${c.rounds!.length} rounds (lean first, then pipeline first, in turn): CPU ratio ${list((x) => x.cpuRatio)}; ` +
          `credits/s ratio ${list((x) => x.vsLean)}. The ÷ columns are their medians; the other figures are the round with the median CPU ratio.`,
      );
    }
    out.push("  CPU ms per credit by process (share of the system's total):");
    for (const c of r.compare) {
      for (const x of [c.lean, c.pipeline, ...(c.settlement ? [c.settlement] : [])]) {
        const parts = Object.entries(x.cpuMsPerCredit.byProcess).map(
          ([k, v]) => `${k} ${v.toFixed(3)} (${((x.cpuShares[k] ?? 0) * 100).toFixed(0)} %)`,
        );
        out.push(
          `    @${c.getOrderDelayMs} ms ${x.system.padEnd(10)} ${parts.join(', ')}; ${x.postgres.transactionsPerCredit.toFixed(2)} Postgres tx/credit`,
        );
      }
    }
    const p0 = r.compare.find((c) => c.getOrderDelayMs === 0)?.pipeline.redis;
    if (p0) {
      out.push(
        `  Redis per credit @0 ms: BullMQ scripts ${p0.scripts.calls.toFixed(2)} calls, ${p0.scripts.usec.toFixed(0)} µs; XADD (event stream entries) ${p0.streamEntries.toFixed(2)}; ` +
          `AOF ${n0(p0.aofBytes)} B, ${p0.aofWrites === null ? '?' : p0.aofWrites.toFixed(2)} AOF writes (each fsynced)`,
      );
    }
    const s0 = r.compare.find((c) => c.settlement);
    if (s0?.settlement)
      out.push(
        `  in-request receiver through @mcb/settlement (not the baseline): ${r.compare
          .filter((c) => c.settlement)
          .map(
            (c) =>
              `@${c.getOrderDelayMs} ms ${n0(c.settlement!.creditsPerSecond)}/s, ${c.settlement!.cpuMsPerCredit.total.toFixed(2)} CPU ms/credit`,
          )
          .join('; ')}`,
      );
  }
  if (r.e2e) {
    const e = r.e2e;
    out.push('', `END TO END (sandbox → ingest → worker → Postgres; ${e.inFlight} orders in flight)`);
    out.push(
      grid([
        ['orders', 'credits/s', 'p50 ms', 'p99 ms', 'max ms', 'CPU ingest/worker/sandbox', 'failed attempts', 'ratio'],
        [
          n0(e.credited),
          n0(e.creditsPerSecond),
          n0(e.latencyMs.p50),
          n0(e.latencyMs.p99),
          n0(e.latencyMs.max),
          `${e.cpu.ingest.toFixed(2)}/${e.cpu.worker.toFixed(2)}/${e.cpu.sandboxAndDriver.toFixed(2)}`,
          String(e.failedAttempts),
          e.ratio.toFixed(2),
        ],
      ]),
    );
  }
  const wp = r.e2e?.workerProfile;
  if (wp) {
    out.push('  worker CPU profile (end to end), self time by category:');
    out.push(
      `    ${wp.byCategory
        .slice(0, 10)
        .map((c) => `${c.category} ${(c.share * 100).toFixed(1)}%`)
        .join(', ')}`,
    );
  }
  if (r.search) {
    const x = r.search;
    out.push(
      '',
      `SEARCH (GET /api/callbacks through the console's routes; ${n0(x.rows)} receipts and arrivals, filled in ${n0(x.fillSeconds)} s; ${x.queries} queries per filter; load average ${x.loadAverage.before.toFixed(1)} → ${x.loadAverage.after.toFixed(1)})`,
    );
    const rows = [['filter', 'rows/page', 'p50 ms', 'p99 ms', 'max ms', 'query alone p50/p99 ms']];
    for (const f of x.filters)
      rows.push([
        f.name,
        n0(f.rowsPerPage),
        ms(f.latencyMs.p50),
        ms(f.latencyMs.p99),
        ms(f.latencyMs.max),
        f.queryMs ? `${ms(f.queryMs.p50)} / ${ms(f.queryMs.p99)}` : '-',
      ]);
    out.push(grid(rows));
  }
  if (r.backlog) {
    const b = r.backlog;
    out.push('', 'BACKLOG (BullMQ addBulk with the contract ids/options; one worker drains it)');
    out.push(
      grid([
        [
          'jobs',
          'Redis B/job',
          'enqueue s',
          'drained',
          'drain/s',
          'full drain s',
          'RSS start',
          'RSS mid',
          'RSS end',
          'RSS /1k jobs',
        ],
        [
          n0(b.jobs),
          n0(b.redisBytesPerJob),
          b.enqueueSeconds.toFixed(1),
          `${n0(b.drained)}${b.complete ? '' : ' (time box)'}`,
          n0(b.drainPerSecond),
          `${n0(b.projectedFullDrainSeconds)}${b.complete ? '' : ' (proj.)'}`,
          mib(b.rss.startBytes),
          mib(b.rss.middleBytes),
          mib(b.rss.endBytes),
          `${(b.rss.slopeBytesPerKiloJob / 1024).toFixed(0)} KiB`,
        ],
      ]),
    );
  }
  if (r.fairness) {
    const f = r.fairness;
    out.push(
      '',
      `FAIRNESS (A floods ${n0(f.options.flood)} pay-ins +10 % at ${f.options.aDelayMs} ms of Get order, getOrderRps ${f.options.aRps}; B and C ${f.options.rate}/s each at ${f.options.bcDelayMs} ms; ${f.options.workers} worker processes; callback = put on the merchant's queue)`,
    );
    const rows = [['row', 'merchant', 'credited', 'credits/s', 'p50 ms', 'p99 ms', 'cores: ours / rest of machine']];
    for (const row of f.rows)
      row.merchants.forEach((m, i) => {
        const c = row.cores;
        rows.push([
          i === 0 ? row.name : '',
          m.ref.toUpperCase(),
          `${n0(m.credited)}/${n0(m.sent)}`,
          n0(m.creditsPerSecond),
          n0(m.callbackToCreditMs.p50),
          n0(m.callbackToCreditMs.p99),
          i === 0 ? `${(c.workers + c.redis + c.bench + c.postgres).toFixed(2)} / ${c.rest.toFixed(2)}` : '',
        ]);
      });
    out.push(grid(rows));
  }
  if (r.targets.length) {
    out.push('', 'TARGETS (reported, not asserted)');
    out.push(
      grid([
        ['target', 'wanted', 'reached', ''],
        ...r.targets.map((t) => [t.name, t.target, t.value, t.met === null ? '' : t.met ? 'met' : 'MISSED']),
      ]),
    );
  }
  return out.join('\n');
}
