/**
 * The pipeline as production runs it, on servers the chaos run owns: its own redis-server (AOF, fsync always) and
 * its own Postgres cluster, one ingest main with INGEST_WORKERS cluster processes, N worker mains, and the sandbox
 * platform in this process (time-scaled, so its retry schedule fits in the run). The `sentinel` topology puts a
 * primary, two replicas and three sentinels in place of the one redis-server, and PgBouncer between the workers
 * and Postgres.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrateDatabase } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { waitFor } from '@mcb/testkit';
import { buildApp as buildSandbox, type Simulator } from '../../../apps/sandbox/src/app.ts';
import { createTestKeys, type TestKeys } from '../helpers/keys.ts';
import { freePort } from '@mcb/testkit';
import { startNodeProcess, type NodeProcess } from '../helpers/node-process.ts';
import { startOwnPostgres, type OwnPostgres } from '../helpers/own-postgres.ts';
import {
  startOwnPgBouncer,
  startOwnRedis,
  startOwnSentinel,
  type OwnPgBouncer,
  type OwnRedis,
  type OwnSentinelSetup,
} from '@mcb/testkit';

export const CHAOS_MERCHANT_NO = 'M-CHAOS-1';

/** Options of {@link startChaosStack}. */
export interface StackOptions {
  /** Ingest cluster processes behind the one public port. */
  ingestWorkers: number;
  /** Worker main processes. */
  workers: number;
  /** WORKER_CONCURRENCY of each, or `adaptive`: unset, so each runs the adaptive limit over its fetch loops. */
  workerConcurrency: number | 'adaptive';
  /** Sandbox time scale: platform retries at 3, 9, 27, 81 min become these divided by it. */
  timeScale: number;
  /** Worker job lock (a killed worker's jobs run again once it lapses), e.g. '3s'. */
  lockDuration: string;
  /** Worker stalled-job check period, e.g. '1s'. */
  stalledInterval: string;
  /** ORDER_GRACE_PERIOD and CONFIRM_MAX_WAIT of the workers (forged unknown orders end in review after it). */
  verifyWait: string;
  /** `single`: one redis-server. `sentinel`: primary, two replicas, three sentinels; workers through PgBouncer. */
  topology?: 'single' | 'sentinel';
  /** INGEST_MIN_REPLICAS of ingest (sentinel topology). Above 0, every data node also gets Redis's own min-replicas-to-write 1. */
  minReplicas?: number;
}

/** Redis's own refusal of writes on a primary without a replica, set whenever INGEST_MIN_REPLICAS > 0 (docs/deployment.md). */
export const MIN_REPLICAS_TO_WRITE_ARGS = ['--min-replicas-to-write', '1', '--min-replicas-max-lag', '10'];

export interface ChaosStack {
  /** The one redis-server (single topology), or the initial primary (sentinel topology). */
  redis: OwnRedis;
  /** The sentinel setup (sentinel topology). */
  sentinel?: OwnSentinelSetup;
  /** PgBouncer between workers and Postgres (sentinel topology). */
  pgbouncer?: OwnPgBouncer;
  /** URL of the Redis node that is primary now. */
  primaryUrl(): Promise<string>;
  pg: OwnPostgres;
  databaseUrl: string;
  prefix: string;
  keys: TestKeys;
  sim: Simulator;
  ingestUrl: string;
  ingest: NodeProcess;
  /** Live worker processes by slot. */
  workers: (NodeProcess | undefined)[];
  /** SIGKILL the worker in `slot` and start a new one there (not awaited for readiness). */
  killAndRestartWorker(slot: number): Promise<void>;
  /** Wait until every slot has a worker that has started consuming. */
  allWorkersReady(timeoutMs: number): Promise<void>;
  /** Processes that died without being killed by the run. */
  unexpectedExits(): string[];
  /** Lines of the ingest log saying a cluster worker exited (the primary restarts it). */
  ingestWorkerExits(): number;
  logDir: string;
  close(): Promise<void>;
}

export async function startChaosStack(opts: StackOptions): Promise<ChaosStack> {
  const logDir = mkdtempSync(join(tmpdir(), 'mcb-chaos-logs-'));
  const closers: (() => Promise<unknown>)[] = [];
  const unexpected: string[] = [];
  const expectedExit = new Set<number>();
  let closing = false;
  const close = async () => {
    closing = true;
    for (const c of closers.reverse()) await c().catch(() => undefined);
  };
  try {
    const keys = createTestKeys();
    closers.push(async () => keys.remove());
    const sentinelTopology = opts.topology === 'sentinel';
    const minReplicas = opts.minReplicas ?? 0;
    let sentinel: OwnSentinelSetup | undefined;
    let redis: OwnRedis;
    if (sentinelTopology) {
      sentinel = await startOwnSentinel('mcb', {
        sentinels: 3,
        replicas: 2,
        redisArgs: minReplicas > 0 ? MIN_REPLICAS_TO_WRITE_ARGS : [],
      });
      closers.push(() => sentinel!.destroy());
      redis = sentinel.primary;
    } else {
      redis = await startOwnRedis();
      closers.push(() => redis.destroy());
    }
    const pg = await startOwnPostgres();
    closers.push(() => pg.destroy());
    const databaseUrl = pg.url('mcb_chaos');
    await migrateDatabase(databaseUrl, { defaultMerchantNo: CHAOS_MERCHANT_NO });
    const pgbouncer = sentinelTopology ? await startOwnPgBouncer(databaseUrl, { poolSize: 8 }) : undefined;
    if (pgbouncer) closers.push(() => pgbouncer.destroy());
    const workerDatabaseUrl = pgbouncer ? pgbouncer.urlFor(databaseUrl) : databaseUrl;
    const prefix = 'chaos';

    const sandbox = await buildSandbox({
      merchantNo: CHAOS_MERCHANT_NO,
      merchantPublicKeyPem: keys.publicKeyPem,
      timeScale: opts.timeScale,
      firstAttemptDelayMs: 1000,
      replyTimeoutMs: 5000,
      logger: createLogger({ name: 'sandbox', level: 'silent' }),
    });
    closers.push(() => sandbox.close());
    const sandboxUrl = await sandbox.listen({ host: '127.0.0.1', port: 0 });

    const ingestPort = await freePort();
    const ingestUrl = `http://127.0.0.1:${ingestPort}`;
    const redisEnv: Record<string, string> = sentinel
      ? { REDIS_SENTINELS: sentinel.sentinels, REDIS_SENTINEL_NAME: sentinel.name }
      : { REDIS_URL: redis.url };
    const common = { MERCHANT_NO: CHAOS_MERCHANT_NO, ...redisEnv, QUEUE_PREFIX: prefix, LOG_LEVEL: 'info' };
    const watchExit = (p: NodeProcess) => {
      void p.exited.then(({ code, signal }) => {
        if (!closing && !expectedExit.has(p.pid)) unexpected.push(`${p.name} (pid ${p.pid}) exited: ${code ?? signal}`);
      });
      return p;
    };
    const ingest = watchExit(
      startNodeProcess(
        'ingest',
        'apps/ingest/src/main.ts',
        {
          ...common,
          MERCHANT_PRIVATE_KEY_FILE: keys.privateKeyFile,
          INGEST_HOST: '127.0.0.1',
          INGEST_PORT: String(ingestPort),
          INGEST_METRICS_PORT: '0',
          INGEST_WORKERS: String(opts.ingestWorkers),
          INGEST_MIN_REPLICAS: String(minReplicas),
        },
        join(logDir, 'ingest.log'),
      ),
    );
    closers.push(async () => {
      expectedExit.add(ingest.pid);
      await ingest.stop(5000);
    });

    const workers: (NodeProcess | undefined)[] = [];
    let started = 0;
    const startWorker = (slot: number) => {
      const p = watchExit(
        startNodeProcess(
          `worker-${slot}#${++started}`,
          'apps/worker/src/main.ts',
          {
            ...common,
            DATABASE_URL: workerDatabaseUrl,
            PLATFORM_BASE_URL: sandboxUrl,
            PLATFORM_ALLOW_HTTP: 'true',
            PLATFORM_TIMEOUT: '2s',
            ...(opts.workerConcurrency === 'adaptive' ? {} : { WORKER_CONCURRENCY: String(opts.workerConcurrency) }),
            WORKER_METRICS_PORT: '0',
            WORKER_LOCK_DURATION: opts.lockDuration,
            WORKER_STALLED_INTERVAL: opts.stalledInterval,
            ORDER_GRACE_PERIOD: opts.verifyWait,
            CONFIRM_MAX_WAIT: opts.verifyWait,
          },
          join(logDir, `worker-${slot}.log`),
        ),
      );
      workers[slot] = p;
      return p;
    };
    closers.push(async () => {
      await Promise.all(
        workers.map(async (w) => {
          if (!w) return;
          expectedExit.add(w.pid);
          await w.kill();
        }),
      );
    });
    for (let i = 0; i < opts.workers; i++) startWorker(i);

    // Ready: ingest answers readyz (Redis reachable and durable) and every worker says it consumes the queue.
    await waitFor(
      async () => {
        const res = await fetch(`${ingestUrl}/readyz`).catch(() => undefined);
        return res?.status === 200;
      },
      { timeoutMs: 30_000, message: `ingest did not become ready (log: ${logDir}/ingest.log)` },
    );
    const allWorkersReady = async (timeoutMs: number) => {
      await Promise.all(workers.map((w) => w?.waitForOutput(/worker started/, timeoutMs)));
    };
    await allWorkersReady(30_000);

    const stack: ChaosStack = {
      redis,
      sentinel,
      pgbouncer,
      primaryUrl: async () => (sentinel ? `redis://127.0.0.1:${await sentinel.primaryPort()}` : redis.url),
      pg,
      databaseUrl,
      prefix,
      keys,
      sim: sandbox.sandbox,
      ingestUrl,
      ingest,
      workers,
      logDir,
      allWorkersReady,
      async killAndRestartWorker(slot) {
        const w = workers[slot];
        if (w) {
          expectedExit.add(w.pid);
          await w.kill();
        }
        startWorker(slot);
      },
      unexpectedExits: () => [...unexpected],
      ingestWorkerExits: () => {
        try {
          return readFileSync(join(logDir, 'ingest.log'), 'utf8')
            .split('\n')
            .filter((l) => l.includes('ingest worker exited')).length;
        } catch {
          return 0;
        }
      },
      close,
    };
    return stack;
  } catch (e) {
    await close();
    throw e;
  }
}

/** Remove the run's log folder (kept when a run fails, for a human to read). */
export function removeLogs(stack: ChaosStack): void {
  rmSync(stack.logDir, { recursive: true, force: true });
}
