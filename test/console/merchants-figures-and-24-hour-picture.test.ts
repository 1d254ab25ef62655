import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { loadConfig, type Config } from '@mcb/core/config';
import { callbackArrivals, merchantMinutes, merchantPauses } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { merchantKeys } from '@mcb/core/queue';
import { createRedis, type Redis } from '@mcb/core/redis';
import { useTestEnv, writeMerchantsFile } from '@mcb/testkit';
import { Queue, UnrecoverableError, Worker } from 'bullmq';
import { asc, eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../apps/console/src/app.ts';
import { merchantQueues, type MerchantQueues } from '../../apps/console/src/callbacks/merchant-queues.ts';
import { historyCharts } from '../../apps/console/src/merchants/chart.ts';
import { readMinutes, rollupMinutes } from '../../apps/console/src/merchants/minutes.ts';
import type { MerchantFigures } from '../../apps/console/src/merchants/queries.ts';
import { renderMerchants } from '../../apps/console/src/cli/commands/merchants.ts';
import { createLaneSnapshot } from '../../apps/worker/src/lane-snapshot.ts';
import { AUTH, AUTH_LIMITS_OFF, TOKEN } from '../../apps/console/test/helpers/fake-platform.ts';

// The merchants page's figures (GET /api/merchants) against a real queue, Postgres and the workers' snapshots in
// Redis, and the 24-hour picture rolled up into merchant_minutes.
const env = useTestEnv();
const logger = createLogger({ name: 'merchants-page-test', level: 'silent' });
const file = writeMerchantsFile([
  { ref: 'a', merchantNo: 'M-A', getOrderRps: 20, weight: 3 },
  { ref: 'b', merchantNo: 'M-B' },
]);
let config: Config;
let redis: Redis;
let queues: MerchantQueues;
let clients: PlatformClient[];
let app: FastifyInstance;

async function startConsole(): Promise<FastifyInstance> {
  const platforms = new Map(
    config.merchants.map((m) => [
      m.ref,
      createPlatformClient({ baseUrl: 'http://127.0.0.1:9', merchantNo: m.merchantNo, timeoutMs: 500 }),
    ]),
  );
  clients = [...platforms.values()];
  const built = await buildApp({
    config,
    db: env.db,
    platform: platforms.get('a')!,
    platforms,
    logger,
    redis,
    queues,
    replayDriver: false,
    minutesRollupEveryMs: 0,
  });
  await built.ready();
  return built;
}

beforeAll(async () => {
  config = loadConfig(
    {
      MERCHANTS_FILE: file.path,
      PLATFORM_BASE_URL: 'http://127.0.0.1:9',
      PLATFORM_ALLOW_HTTP: 'true',
      PLATFORM_MAX_RPS: '50',
      CONSOLE_TOKEN: TOKEN,
      DATABASE_URL: env.databaseUrl,
      QUEUE_PREFIX: env.prefix,
      LOG_LEVEL: 'silent',
      ...AUTH_LIMITS_OFF,
    },
    'console',
  );
  redis = createRedis(env.redisUrl, 'producer');
  queues = merchantQueues(
    config.merchants,
    env.prefix,
    (name, prefix) => new Queue(name, { connection: redis, prefix }),
  );
  app = await startConsole();
});

afterAll(async () => {
  await app?.close();
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(queues.list.map((q) => q.queue.close()));
  redis?.disconnect();
  file.remove();
});

const get = (url: string) => app.inject({ method: 'GET', url, headers: AUTH });
const ago = (ms: number, from = Date.now()) => new Date(from - ms);
let seq = 0;

/** One callback_arrivals row as a worker writes it. */
function arrival(merchantNo: string, receivedAt: Date, status: 'applied' | 'failed' | 'waiting', updatedAt?: Date) {
  seq += 1;
  return {
    jobId: `payin-T${seq}-1`,
    merchantNo,
    kind: 'payin' as const,
    orderNo: `T${seq}`,
    state: 1,
    merchantOrderNo: `MO-${seq}`,
    receivedAt,
    firstSeenAt: receivedAt,
    updatedAt: updatedAt ?? receivedAt,
    attempts: 1,
    status,
    outcome: status === 'applied' ? 'credited' : null,
  };
}

/** The queue of merchant `ref`, in the four states a person reads: failed, in flight, waiting, delayed. */
async function fillQueue(ref: string) {
  const { queue } = queues.of(ref);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const connection = createRedis(env.redisUrl, 'worker');
  const worker = new Worker(
    queue.name,
    async (job) => {
      if (job.name === 'fail') throw new UnrecoverableError('for good');
      await gate;
    },
    { connection, prefix: queue.opts.prefix, concurrency: 1 },
  );
  const failed = new Promise((r) => worker.once('failed', r));
  await queue.add('fail', { receivedAt: new Date().toISOString() });
  await failed;
  const active = new Promise((r) => worker.once('active', r));
  await queue.add('hold', { receivedAt: new Date().toISOString() });
  await active;
  // The worker is busy with `hold` (concurrency 1): these wait; the oldest was received 10 minutes ago.
  await queue.add('w1', { receivedAt: ago(10 * 60_000).toISOString() });
  await queue.add('w2', { receivedAt: new Date().toISOString() });
  await queue.add('later', { receivedAt: new Date().toISOString() }, { delay: 600_000 });
  return async () => {
    release();
    await worker.close(true);
    connection.disconnect();
  };
}

describe('GET /api/merchants', () => {
  it('says nothing on the landing page while all is well', async () => {
    const res = await get('/search');
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain('Merchants that need a person');
  });

  it("gives each merchant's queue, credits, pause and the live workers' figures; a dead worker's are dropped", async () => {
    const stopWorker = await fillQueue('a');
    try {
      const now = Date.now();
      await env.db.db.insert(callbackArrivals).values([
        arrival('M-A', ago(22_000, now), 'applied', ago(20_000, now)), // credited 20 s ago, after 2 s
        arrival('M-A', ago(30 * 60_000 + 5000, now), 'applied', ago(30 * 60_000, now)), // 30 min ago, after 5 s
        arrival('M-A', ago(3 * 3600_000, now), 'applied', ago(3 * 3600_000 - 1000, now)), // 3 h ago: not this hour
        arrival('M-B', ago(3 * 60_000, now), 'waiting'), // B: arriving, nothing credited
        arrival('M-B', ago(4 * 60_000, now), 'waiting'),
      ]);
      await env.db.db
        .insert(merchantPauses)
        .values({ merchantNo: 'M-A', pausedBy: 'ada.admin', reason: 'suspected key leak' });

      // A live worker's snapshot of A (the worker's own writer), and a dead worker's, 60 s old by Redis's clock.
      const keyA = merchantKeys(env.prefix, 'a').laneSnapshots;
      const live = createLaneSnapshot({
        redis,
        key: keyA,
        breaker: () => 'closed',
        getOrderRps: 20,
        logger,
        intervalMs: 60_000,
        processId: 'live-worker',
      });
      for (let i = 1; i <= 100; i++) live.sample({ ms: i, ok: i % 10 !== 0 });
      await live.write();
      const [sec] = await redis.time();
      await redis.hset(
        keyA,
        'dead-worker',
        `${Number(sec) * 1000 - 60_000} ${JSON.stringify({
          windowMs: 5000,
          getOrders: 500,
          getOrderErrors: 500,
          getOrderP99Ms: 99_999,
          breaker: 'open',
          getOrderRps: 20,
        })}`,
      );

      const res = await get('/api/merchants');
      expect(res.statusCode).toBe(200);
      const [a, b] = (res.json() as { merchants: MerchantFigures[] }).merchants;
      expect(a).toMatchObject({
        ref: 'a',
        merchantNo: 'M-A',
        weight: 3,
        paused: { by: 'ada.admin', reason: 'suspected key leak' },
        waiting: 2,
        delayed: 1,
        failed: 1,
        active: 1,
        creditsLastMinute: 1,
        creditsLastHour: 2,
        creditP99Ms: 5000,
        workers: 1,
        getOrderP99Ms: 99,
        getOrderErrorRate: 0.1,
        breaker: 'closed',
        getOrderRps: 20,
        getOrderRate: 100 / 60,
        budgetUse: 100 / 60 / 20,
      });
      expect(Date.parse(a!.paused!.since)).toBeGreaterThan(now - 60_000);
      expect(Date.parse(a!.oldestWaitingSince!)).toBeLessThan(now - 9 * 60_000);
      expect(a!.attention.join('\n')).toMatch(/paused by ada\.admin: suspected key leak\n1 job\(s\) failed for good/);
      // The dead worker's snapshot is neither merged nor kept.
      expect(await redis.hkeys(keyA)).toEqual(['live-worker']);
      // B: no worker reports (null, not zero), its budget is PLATFORM_MAX_RPS, callbacks arrive and none is credited.
      expect(b).toMatchObject({
        ref: 'b',
        paused: null,
        waiting: 0,
        creditsLastHour: 0,
        creditP99Ms: null,
        getOrderP99Ms: null,
        getOrderErrorRate: null,
        getOrderRate: null,
        budgetUse: null,
        workers: 0,
        breaker: 'closed',
        getOrderRps: 50,
        receivedLast10Minutes: 2,
      });
      expect(b!.attention).toEqual(['no credits in 10 minutes while 2 callback(s) arrived']);

      // The landing page: a line per merchant that needs a person, each linking to its page.
      const landing = await get('/search');
      expect(landing.body).toContain('Merchants that need a person');
      expect(landing.body).toContain('<a href="/merchants/a"><strong>a</strong></a>: paused by ada.admin');
      expect(landing.body).toContain('<a href="/merchants/b"><strong>b</strong></a>: no credits in 10 minutes');

      // The list page and the CLI's table show the same figures.
      const page = await get('/merchants');
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-security-policy']).toMatch(/default-src 'none'/);
      expect(page.body).toMatch(/<td data-label="Failed" class="num">1<\/td>/);
      expect(page.body).not.toMatch(/<script|style="/);
      const cli = renderMerchants({ merchants: [a!, b!] });
      expect(cli).toMatch(
        /^a\s+M-A\s+paused by ada\.admin since .*: suspected key leak\s+2\s+1\s+1\s+1\s+1\s+2\s+5000 ms\s+99 ms/m,
      );

      await live.close();
      expect(await redis.exists(keyA)).toBe(0);
    } finally {
      await stopWorker();
      await env.db.db.delete(merchantPauses);
    }
  }, 30_000);

  it('an unknown merchant is a 404, on the page and in the API', async () => {
    expect((await get('/merchants/zz')).statusCode).toBe(404);
    expect((await get('/api/merchants/zz/minutes')).statusCode).toBe(404);
  });

  it('the CLI escapes what a terminal would run', () => {
    const out = renderMerchants({
      merchants: [
        {
          ref: 'a',
          merchantNo: 'M-A',
          weight: 1,
          paused: { by: 'x', reason: 'evil \u001b[2K\u202e reason', since: new Date().toISOString() },
          waiting: null,
          delayed: null,
          failed: null,
          active: null,
          oldestWaitingSince: null,
          creditsLastMinute: 0,
          creditsLastHour: 0,
          receivedLast10Minutes: 0,
          creditsLast10Minutes: 0,
          creditP99Ms: null,
          getOrderP99Ms: null,
          getOrderErrorRate: null,
          breaker: null,
          getOrderRps: 0,
          getOrderRate: null,
          budgetUse: null,
          workers: null,
          attention: [],
        },
      ],
    });
    // eslint-disable-next-line no-control-regex -- matching control characters is the point
    expect(out).not.toMatch(/[\u001b\u202e]/);
    expect(out).toContain('evil');
  });
});

describe('the 24-hour picture', () => {
  // A fixed "now" (a minute's 30th second) so that the minutes asserted are the same on every run.
  const now = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 30_000);
  const minute = (back: number) => new Date(now.getTime() - 30_000 - back * 60_000);

  it('rolls closed minutes up once (two runs, two consoles: the same rows), zeros included, and survives a restart', async () => {
    await env.db.db.delete(callbackArrivals);
    const at = (back: number, s: number) => new Date(minute(back).getTime() + s * 1000);
    await env.db.db.insert(callbackArrivals).values([
      // Minute -10: three received; two credited in minute -9 (after 40 s and 50 s); one failed for good in -8.
      arrival('M-A', at(10, 10), 'applied', at(9, 0) /* +50 s */),
      arrival('M-A', at(10, 20), 'applied', at(9, 0) /* +40 s */),
      arrival('M-A', at(10, 30), 'failed', at(8, 5)),
      // A callback received 3 hours ago, credited in minute -9: counted as that minute's credit.
      arrival('M-A', at(180, 0), 'applied', at(9, 30)),
      // The open minute: received and credited, not rolled up.
      arrival('M-A', at(0, 1), 'applied', at(0, 2)),
    ]);

    const [first, second] = await Promise.all([
      rollupMinutes(env.db.db, ['M-A', 'M-B'], now),
      rollupMinutes(env.db.db, ['M-A', 'M-B'], now),
    ]);
    // Two consoles at once: one rolls up, the other skips (or runs after it); never an error.
    expect([first, second]).toContain(true);
    const rows = async () =>
      env.db.db.select().from(merchantMinutes).orderBy(asc(merchantMinutes.merchantNo), asc(merchantMinutes.minute));
    const once = await rows();
    expect(await rollupMinutes(env.db.db, ['M-A', 'M-B'], now)).toBe(true);
    expect(await rows()).toEqual(once);
    // Every closed minute of the last 24 hours, for each merchant: zeros where nothing happened.
    expect(once.filter((r) => r.merchantNo === 'M-A')).toHaveLength(1440);
    expect(once.filter((r) => r.merchantNo === 'M-B').every((r) => r.received === 0 && r.credited === 0)).toBe(true);
    const of = (back: number) =>
      once.find((r) => r.merchantNo === 'M-A' && r.minute.getTime() === minute(back).getTime());
    expect(of(10)).toMatchObject({ received: 3, credited: 0, failed: 0, creditP99Ms: null });
    expect(of(9)).toMatchObject({ received: 0, credited: 3, failed: 0 });
    // p99 of three waits (50 s, 40 s, and 171 min 30 s for the callback received 3 hours ago): the longest.
    expect(of(9)!.creditP99Ms).toBe((171 * 60 + 30) * 1000);
    expect(of(8)).toMatchObject({ received: 0, credited: 0, failed: 1 });
    expect(of(1)).toMatchObject({ received: 0, credited: 0, failed: 0 });

    const picture = await readMinutes(env.db.db, 'M-A', now);
    expect(picture).toHaveLength(1441);
    expect(picture.at(-1)).toMatchObject({ minute: minute(0).toISOString(), received: 1, credited: 1 });

    // A restart: a new console over the same database reads the rolled-up minutes, even with the arrivals gone.
    await app.close();
    await Promise.all(clients.map((c) => c.close()));
    await env.db.db.delete(callbackArrivals).where(eq(callbackArrivals.merchantNo, 'M-A'));
    app = await startConsole();
    const res = await get('/api/merchants/a/minutes');
    expect(res.statusCode).toBe(200);
    const after = (res.json() as { minutes: { minute: string; received: number }[] }).minutes;
    expect(after.find((m) => m.minute === minute(10).toISOString())?.received).toBe(3);
  }, 30_000);

  it('draws the series as inline SVG with a text alternative, no script, and escapes what it prints', async () => {
    const picture = await readMinutes(env.db.db, 'M-A', now);
    const svg = historyCharts('<b>"a"</b>', picture).value;
    for (const series of ['received', 'credited', 'failed', 'p99'])
      expect(svg).toMatch(new RegExp(`<(polyline|circle) class="series-${series}"[^>]* data-series="${series}"`));
    expect(svg).toMatch(
      /<svg id="chart-callbacks"[^>]* role="img" aria-labelledby="chart-callbacks-t chart-callbacks-d"/,
    );
    expect(svg).toContain('<title id="chart-callbacks-t">&lt;b&gt;&quot;a&quot;&lt;/b&gt;: callbacks per minute');
    expect(svg).toMatch(
      /<desc id="chart-callbacks-d">From \d\d:\d\d to \d\d:\d\d UTC: 4 received, 3 credited, 1 failed/,
    );
    expect(svg).not.toContain('<b>');
    expect(svg).not.toMatch(/<script|style=|href=|xlink/);

    const page = await get('/merchants/a');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-security-policy']).toMatch(/^default-src 'none'; script-src 'self';/);
    expect(page.body).toContain('<svg id="chart-p99"');
    expect(page.body).not.toMatch(/<script|style="/);
  });
});

describe('pnpm cli merchants list', () => {
  const CLI = fileURLToPath(new URL('../../apps/console/src/cli/main.ts', import.meta.url));
  const cli = (url: string, ...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [CLI, 'merchants', ...args],
        { env: { PATH: process.env.PATH, CONSOLE_URL: url, CONSOLE_OPERATOR_TOKEN: TOKEN }, timeout: 20_000 },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  it("prints the API's figures as a table, or as JSON, and refuses an unknown subcommand", async () => {
    await env.db.db
      .insert(merchantPauses)
      .values({ merchantNo: 'M-B', pausedBy: 'ada.admin', reason: 'line one\n\u001b[31mline two' });
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const table = await cli(url, 'list');
      expect(table.code).toBe(0);
      const lines = table.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^ref\s+merchant no\s+state\s+wait\s+delay\s+fail\s+active/);
      expect(lines[1]).toMatch(/^a\s+M-A\s+running\s/);
      // The reason's line break stays in its cell (escaped), and ESC never reaches the terminal.
      const b = lines.find((l) => l.startsWith('b '));
      expect(b).toMatch(/^b\s+M-B\s+paused by ada\.admin since [\d-]+ [\d:]+: line one\\n\\x1b\[31mline two\s/);
      expect(table.stdout).not.toContain('\u001b');
      const json = await cli(url, 'list', '--json');
      expect(json.code).toBe(0);
      const body = JSON.parse(json.stdout) as { merchants: MerchantFigures[] };
      expect(body.merchants.map((m) => [m.ref, m.paused?.by ?? null])).toEqual([
        ['a', null],
        ['b', 'ada.admin'],
      ]);
      const bad = await cli(url, 'lsit');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('unknown subcommand "lsit"');
    } finally {
      await env.db.db.delete(merchantPauses);
    }
  }, 60_000);
});
