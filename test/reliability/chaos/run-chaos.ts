/**
 * The chaos run: the sandbox finalises orders (some sent 2-3 times at once, some payouts followed by a stale event,
 * a few forged callbacks) while workers are SIGKILLed and restarted every few seconds, Postgres is restarted once and
 * Redis is SIGKILLed and restarted from its AOF once. Then everything is drained and audited. Used by the bounded
 * test (test/reliability/chaos-bounded.test.ts) and by `pnpm test:chaos` (scripts/chaos.ts).
 */
import { randomBytes, randomInt } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';
import { waitFor } from '@mcb/testkit';
import type { Delivery } from '../../../apps/sandbox/src/app.ts';
import { audit, queueCounts, unfinished, type AuditResult, type ExpectedOrder, type RefusedPair } from './audit.ts';
import { repliesByFault, runSentinelFaults, type FaultReplies, type FaultWindow } from './sentinel-faults.ts';
import { removeLogs, startChaosStack, type StackOptions } from './stack.ts';

/** Options of {@link runChaos}. Times are real milliseconds from the moment the first order is finalised. */
export interface ChaosOptions {
  payins: number;
  payouts: number;
  /** Share of orders whose every attempt is sent 2 or 3 times at once. @defaultValue 0.3 */
  duplicateShare?: number;
  /** Share of payouts followed by a stale event of the other final state. @defaultValue 0.05 */
  staleShare?: number;
  /** Forged callbacks for merchant orders nobody knows (end in review). @defaultValue 3 */
  forgedUnknown?: number;
  /** Forged pay-in callbacks with 10x the amount for real orders (never credited at that amount). @defaultValue 3 */
  forgedAmount?: number;
  /**
   * `single` (default): worker kills every few seconds, a Postgres restart and a Redis SIGKILL. `sentinel`: a primary,
   * two replicas and three sentinels, workers through PgBouncer, and the faults of sentinel-faults.ts one after
   * another, `faultGapMs` apart (the single-topology fault options are then unused).
   */
  topology?: 'single' | 'sentinel';
  /** INGEST_MIN_REPLICAS (sentinel topology; above 0 also sets Redis's min-replicas-to-write 1). @defaultValue 0 */
  minReplicas?: number;
  /** Plain load before each sentinel-topology fault. @defaultValue 3000 */
  faultGapMs?: number;
  /** Finalisations are spread evenly over this span. */
  finalizeSpanMs: number;
  /** A worker is SIGKILLed (and restarted) this often while orders are being finalised. */
  workerKillIntervalMs: number;
  /** When Postgres is restarted (`pg_ctl restart -m fast`). */
  pgRestartAtMs: number;
  /** When Redis is SIGKILLed; it is restarted from its AOF `redisDownMs` later. */
  redisKillAtMs: number;
  /** @defaultValue 1500 */
  redisDownMs?: number;
  /** Deadline for every callback delivery to settle (delivered or given up), after the last finalisation. */
  settleTimeoutMs: number;
  /** Deadline for the queue to drain after that. */
  drainTimeoutMs: number;
  stack?: Partial<StackOptions>;
  /** Where the report lines go. @defaultValue console.log */
  log?: (line: string) => void;
}

/** What a run did and counted; `violations` empty means every invariant held. */
export interface ChaosReport {
  orders: { payins: number; payouts: number; forged: number; stale: number };
  callbacks: { deliveries: number; sent: number; duplicateCopies: number; delivered: number; gaveUp: number };
  /** Replies ingest gave, by HTTP status ('none' = no reply: connection refused or timed out). */
  replies: Record<string, number>;
  faults: {
    workerKills: number;
    pgRestarts: number;
    redisRestarts: number;
    unexpectedExits: string[];
    ingestWorkerExits: number;
  };
  /** Sentinel topology: each fault, and what ingest answered from its start to the next one's. */
  faultWindows?: (FaultWindow & FaultReplies)[];
  /** Successful acknowledgements that collapsed onto a job id already stored (duplicate sends, retries). */
  collapsedAtIngest: number;
  audit: AuditResult;
  durationMs: number;
  violations: string[];
}

const DEFAULT_STACK: StackOptions = {
  ingestWorkers: 2,
  workers: 3,
  workerConcurrency: 8,
  timeScale: 300,
  lockDuration: '3s',
  stalledInterval: '1s',
  verifyWait: '3s',
};

function amount(): string {
  return `${randomInt(1, 100_000)}.${String(randomInt(0, 100)).padStart(2, '0')}`;
}

function isFinal(d: Delivery): boolean {
  return d.status === 'delivered' || d.status === 'gave-up' || d.status === 'cancelled';
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => console.log(line));
  const sentinelTopology = options.topology === 'sentinel';
  const stackOptions: StackOptions = {
    ...DEFAULT_STACK,
    ...(sentinelTopology ? { workers: 2, topology: 'sentinel' as const, minReplicas: options.minReplicas ?? 0 } : {}),
    ...options.stack,
  };
  const started = Date.now();
  const stack = await startChaosStack(stackOptions);
  let failed = true;
  try {
    const { sim } = stack;
    log(
      `chaos: stack up in ${Date.now() - started} ms (ingest x${stackOptions.ingestWorkers}, workers x${stackOptions.workers}, time scale ${stackOptions.timeScale}${sentinelTopology ? `; sentinel topology, INGEST_MIN_REPLICAS=${stackOptions.minReplicas}` : ''})`,
    );

    // 1. Orders exist on both sides before any callback: the platform's, and ours (as the console registers them).
    const url = (path: string) => `${stack.ingestUrl}${path}`;
    const dupShare = options.duplicateShare ?? 0.3;
    const staleShare = options.staleShare ?? 0.05;
    const runTag = randomBytes(3).toString('hex');
    type Planned = { ref: string; kind: 'payin' | 'payout'; state: number };
    const planned: Planned[] = [];
    const rows: { merchantOrderNo: string; kind: string; amount: string }[] = [];
    let staleCount = 0;
    for (let i = 0; i < options.payins + options.payouts; i++) {
      const kind = i % (options.payins + options.payouts) < options.payins ? 'payin' : 'payout';
      const faults: { duplicate?: number; stale?: boolean } = {};
      if (Math.random() < dupShare) faults.duplicate = randomInt(2, 4);
      if (kind === 'payout' && Math.random() < staleShare) {
        faults.stale = true;
        staleCount++;
      }
      const path = i % 3 === 0 ? '/callbacks' : `/callbacks/${kind}`;
      const input = {
        currency: 'INR',
        amount: amount(),
        merchantOrderNo: `C${runTag}${String(i).padStart(6, '0')}`,
        callbackUrl: url(path),
        faults,
      };
      const order = kind === 'payin' ? sim.createPayin(input) : sim.createPayout({ ...input, createdVia: 'api' });
      planned.push({ ref: order.orderNo, kind, state: kind === 'payin' ? 6 : Math.random() < 0.5 ? 4 : 5 });
      rows.push({ merchantOrderNo: order.merchantOrderNo, kind, amount: order.amount });
    }
    // Shuffle, so kinds and faults interleave over time.
    for (let i = planned.length - 1; i > 0; i--) {
      const j = randomInt(0, i + 1);
      [planned[i], planned[j]] = [planned[j]!, planned[i]!];
    }
    const db = new pg.Client({ connectionString: stack.databaseUrl });
    await db.connect();
    try {
      for (let i = 0; i < rows.length; i += 500) {
        const batch = rows.slice(i, i + 500);
        const values = batch.map((_, j) => `($${j * 3 + 1}, $${j * 3 + 2}, 'INR', $${j * 3 + 3}, 'chaos')`).join(',');
        await db.query(
          `insert into orders (merchant_order_no, kind, currency, amount, request_hash) values ${values}`,
          batch.flatMap((r) => [r.merchantOrderNo, r.kind, r.amount]),
        );
      }
    } finally {
      await db.end();
    }
    log(`chaos: ${options.payins} pay-ins and ${options.payouts} payouts registered on both sides`);

    // 2. Faults run on their own timers while the orders are finalised.
    let chaosOn = true;
    let workerKills = 0;
    let pgRestarts = 0;
    let redisRestarts = 0;
    const t0 = Date.now();
    const at = (ms: number) => delay(Math.max(0, t0 + ms - Date.now()));
    const sentinelFaults: Promise<FaultWindow[]> = sentinelTopology
      ? runSentinelFaults(stack, options.faultGapMs ?? 3000, log, t0)
      : Promise.resolve([]);
    sentinelFaults.catch(() => {}); // its failure is thrown below, once the finalisations are done (not an unhandled rejection meanwhile)
    const killer = (async () => {
      while (chaosOn && !sentinelTopology) {
        await delay(options.workerKillIntervalMs);
        if (!chaosOn) break;
        const slot = workerKills % stackOptions.workers;
        await stack.killAndRestartWorker(slot);
        workerKills++;
      }
    })();
    const pgRestart = (async () => {
      if (sentinelTopology) return;
      await at(options.pgRestartAtMs);
      const s = Date.now();
      await stack.pg.restart();
      pgRestarts++;
      log(`chaos: Postgres restarted at ${s - t0} ms (took ${Date.now() - s} ms)`);
    })();
    const redisRestart = (async () => {
      if (sentinelTopology) return;
      await at(options.redisKillAtMs);
      const s = Date.now();
      await stack.redis.kill();
      await delay(options.redisDownMs ?? 1500);
      await stack.redis.start();
      redisRestarts++;
      log(`chaos: Redis SIGKILLed at ${s - t0} ms, restarted from its AOF after ${Date.now() - s} ms`);
    })();

    // 3. Finalise, evenly spread, with the forged callbacks in between.
    const refused: RefusedPair[] = [];
    const forgedUnknown = options.forgedUnknown ?? 3;
    const forgedAmount = options.forgedAmount ?? 3;
    const forgeEvery = Math.max(1, Math.floor(planned.length / (forgedUnknown + forgedAmount + 1)));
    let forgedU = 0;
    let forgedA = 0;
    for (let i = 0; i < planned.length; i++) {
      await at((options.finalizeSpanMs * i) / planned.length);
      const p = planned[i]!;
      sim.finalize(p.ref, p.state);
      if (i > 0 && i % forgeEvery === 0) {
        if (forgedU < forgedUnknown) {
          const d = sim.forge({ what: 'unknown-order', type: 'payin', callbackUrl: url('/callbacks/payin') });
          refused.push({
            orderNo: d.orderNo,
            state: d.state,
            merchantOrderNo: d.merchantOrderNo,
            why: 'forged-unknown-order',
          });
          forgedU++;
        } else if (forgedA < forgedAmount) {
          // Only against a pay-in whose genuine callback is already acknowledged: a forged record of the same
          // (OrderNo, state) that arrives first takes the job id, and the genuine one collapses onto it (see
          // docs/reliability.md, "Findings"); the sweep would credit that order only later.
          const target = planned
            .slice(0, i)
            .reverse()
            .find(
              (x) =>
                x.kind === 'payin' &&
                sim.deliveriesOf(x.ref).some((d) => d.event === 'genuine' && d.status === 'delivered'),
            );
          if (target) {
            const d = sim.forge({ what: 'amount', ref: target.ref });
            refused.push({
              orderNo: d.orderNo,
              state: d.state,
              merchantOrderNo: d.merchantOrderNo,
              why: 'forged-amount',
            });
            forgedA++;
          }
        }
      }
    }
    log(`chaos: ${planned.length} orders finalised over ${Date.now() - t0} ms`);
    const [windows] = await Promise.all([sentinelFaults, pgRestart, redisRestart]);

    // 4. Every delivery settles (the platform's retries cover the Redis outage), then the chaos stops.
    await waitFor(() => sim.allDeliveries().every(isFinal), {
      timeoutMs: options.settleTimeoutMs,
      intervalMs: 200,
      message: 'callback deliveries did not settle',
    });
    chaosOn = false;
    await killer;
    await stack.allWorkersReady(30_000);
    log(`chaos: deliveries settled at ${Date.now() - t0} ms; ${workerKills} worker kills; draining`);

    // 5. Drain: no job waiting, active, delayed or retrying.
    const primaryUrl = await stack.primaryUrl();
    const redis = new Redis(primaryUrl, { maxRetriesPerRequest: 3 });
    try {
      await waitFor(async () => unfinished(await queueCounts(redis, stack.prefix)) === 0, {
        timeoutMs: options.drainTimeoutMs,
        intervalMs: 250,
        message: 'queue did not drain',
      });
    } finally {
      redis.disconnect();
    }
    log(`chaos: queue drained at ${Date.now() - t0} ms`);

    // 6. Audit against what the platform finalised.
    for (const d of sim.allDeliveries()) {
      if (d.event === 'stale')
        refused.push({ orderNo: d.orderNo, state: d.state, merchantOrderNo: d.merchantOrderNo, why: 'stale' });
    }
    const expected: ExpectedOrder[] = planned.map((p) => {
      const o = sim.get(p.ref);
      return { orderNo: o.orderNo, merchantOrderNo: o.merchantOrderNo, kind: p.kind, amount: o.amount, state: p.state };
    });
    const deliveries = sim.allDeliveries();
    const acked = deliveries.filter((d) => d.attempts.some((a) => a.outcome === 'success'));
    const jobIds = [...new Set(acked.map((d) => `${d.type}-${d.orderNo}-${d.state}`))];
    const result = await audit({
      databaseUrl: stack.databaseUrl,
      redisUrl: primaryUrl,
      prefix: stack.prefix,
      orders: expected,
      refused,
      jobIds,
    });

    const replies: Record<string, number> = {};
    let sent = 0;
    let successReplies = 0;
    for (const d of deliveries) {
      for (const a of d.attempts) {
        sent++;
        const key = a.status === null ? 'none' : String(a.status);
        replies[key] = (replies[key] ?? 0) + 1;
        if (a.outcome === 'success') successReplies++;
      }
    }
    const violations = [...result.violations];
    const gaveUp = deliveries.filter((d) => d.status === 'gave-up');
    for (const d of gaveUp)
      violations.push(
        `${d.event} callback ${d.orderNo}/${d.state} was never acknowledged (gave up after ${d.attempts.length} sends)`,
      );
    const unexpectedExits = stack.unexpectedExits();
    for (const e of unexpectedExits) violations.push(`process died on its own: ${e}`);
    const ingestWorkerExits = stack.ingestWorkerExits();
    if (ingestWorkerExits > 0) violations.push(`${ingestWorkerExits} ingest cluster workers exited during the run`);

    const report: ChaosReport = {
      orders: { payins: options.payins, payouts: options.payouts, forged: forgedU + forgedA, stale: staleCount },
      callbacks: {
        deliveries: deliveries.length,
        sent,
        duplicateCopies: deliveries.reduce((s, d) => s + d.attempts.filter((a) => a.copy > 1).length, 0),
        delivered: deliveries.filter((d) => d.status === 'delivered').length,
        gaveUp: gaveUp.length,
      },
      replies,
      faults: { workerKills, pgRestarts, redisRestarts, unexpectedExits, ingestWorkerExits },
      ...(sentinelTopology
        ? { faultWindows: repliesByFault(windows, deliveries, Date.now()).map((r, i) => ({ ...windows[i]!, ...r })) }
        : {}),
      collapsedAtIngest: successReplies - jobIds.length,
      audit: result,
      durationMs: Date.now() - started,
      violations,
    };
    printReport(report, log);
    failed = violations.length > 0;
    if (failed) log(`chaos: logs kept in ${stack.logDir}`);
    return report;
  } finally {
    await stack.close();
    if (!failed) removeLogs(stack);
  }
}

export function printReport(r: ChaosReport, log: (line: string) => void): void {
  const a = r.audit;
  const fmt = (o: Record<string, number>) =>
    Object.entries(o)
      .sort()
      .map(([k, v]) => `${k}=${v}`)
      .join(' ') || '-';
  log('chaos report');
  log(
    `  orders            ${r.orders.payins} pay-ins, ${r.orders.payouts} payouts; ${r.orders.forged} forged callbacks, ${r.orders.stale} stale payout events`,
  );
  log(
    `  callbacks         ${r.callbacks.deliveries} events, ${r.callbacks.sent} sends (${r.callbacks.duplicateCopies} duplicate copies); delivered ${r.callbacks.delivered}, gave up ${r.callbacks.gaveUp}`,
  );
  log(`  ingest replies    ${fmt(r.replies)}`);
  if (r.faultWindows) {
    for (const f of r.faultWindows) {
      log(
        `  fault             ${f.name}: ${f.refused} sends refused, the last ${f.refusedForMs} ms after it began; replies ${fmt(f.replies)}`,
      );
    }
  } else {
    log(
      `  faults            worker SIGKILLs ${r.faults.workerKills}, Postgres restarts ${r.faults.pgRestarts}, Redis SIGKILL+AOF restarts ${r.faults.redisRestarts}`,
    );
  }
  log(
    `  jobs              completed ${a.queue.completed}, failed ${a.queue.failed}, retries ${a.jobRetries}, stalled re-runs ${a.jobStalls}`,
  );
  log(`  job outcomes      ${fmt(a.jobOutcomes)}`);
  log(
    `  duplicates        ${r.collapsedAtIngest} acknowledged sends collapsed onto stored job ids at ingest; ${a.jobOutcomes.duplicate ?? 0} jobs dropped as duplicates by the worker`,
  );
  log(
    `  checker           ${a.notApplied} finalised orders not applied, ${a.missingAcknowledged} acknowledged callbacks without a job at the end (lost), ${a.doubleApplied} orders applied twice`,
  );
  log(
    `  applied           credited ${a.credited}, payouts succeeded ${a.succeeded}, refused ${a.refused}; receipts ${a.receipts}; ledger entries ${a.ledgerEntries}`,
  );
  log(`  open reviews      ${fmt(a.reviewsByCode)}`);
  log(`  took              ${(r.durationMs / 1000).toFixed(1)} s`);
  log(`  violations        ${r.violations.length === 0 ? 'none' : r.violations.length}`);
  for (const v of r.violations.slice(0, 30)) log(`    - ${v}`);
}
