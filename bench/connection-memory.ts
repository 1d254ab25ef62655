/**
 * `node bench/connection-memory.ts [--connections 2000]`: the memory one idle connection costs an ingest process,
 * the figure behind INGEST_MAX_CONNECTIONS=auto (apps/ingest/src/capacity.ts, BYTES_PER_IDLE_CONNECTION).
 *
 * For each state a slow client can hold a connection in (silent; partial headers; complete headers and a partial
 * body), a fresh `apps/ingest/src/main.ts` (its bounds raised to 5 minutes so nothing is cut while measuring) gets N
 * connections in that state; the growth of its RSS once they are all open, divided by N, is the cost of one. Uses its
 * own redis-server; prints a table to stdout.
 */
import { connect, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { BENCH_MERCHANT_NO, createKeys } from './lib/callbacks.ts';
import { REPO_ROOT } from './lib/ingest-process.ts';
import { freePort, launch, memoryOf, waitForHttp } from './lib/proc.ts';
import { progress, sleep } from './lib/progress.ts';
import { startRedis } from './lib/redis-server.ts';

const { values: a } = parseArgs({ options: { connections: { type: 'string', default: '2000' } } });
const N = Number(a.connections);

const STATES: { name: string; bytes: string }[] = [
  { name: 'silent (connected, nothing sent)', bytes: '' },
  { name: 'partial headers (slowloris)', bytes: 'POST /callbacks HTTP/1.1\r\nHost: ingest\r\nX-a: b\r\n' },
  {
    name: 'headers + partial body (slow body)',
    bytes:
      'POST /callbacks HTTP/1.1\r\nHost: ingest\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"encryptedData":"',
  },
];

async function openConnections(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  return Number(/^ingest_connections_open(?:\{[^}]*\})? (\S+)$/m.exec(text)?.[1] ?? NaN);
}

/** RSS once it has stopped moving (two readings 500 ms apart within 1 %). */
async function settledRss(pid: number): Promise<number> {
  let last = memoryOf(pid).rss;
  for (let i = 0; i < 20; i++) {
    await sleep(500);
    const now = memoryOf(pid).rss;
    if (Math.abs(now - last) < last * 0.01) return now;
    last = now;
  }
  return last;
}

const redis = await startRedis();
const keys = createKeys(2048);
const rows: string[] = [];
try {
  for (const state of STATES) {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const ingest = launch({
      name: 'ingest',
      args: ['apps/ingest/src/main.ts'],
      cwd: REPO_ROOT,
      env: {
        INGEST_HOST: '127.0.0.1',
        INGEST_PORT: String(port),
        INGEST_METRICS_PORT: String(metricsPort),
        REDIS_URL: redis.url,
        MERCHANT_NO: BENCH_MERCHANT_NO,
        MERCHANT_PRIVATE_KEY_FILE: keys.privateKeyFile,
        LOG_LEVEL: 'warn',
        INGEST_MAX_CONNECTIONS_PER_ADDRESS: '0',
        INGEST_HEADERS_TIMEOUT: '5m',
        INGEST_REQUEST_TIMEOUT: '5m',
        INGEST_BODY_TIMEOUT: '5m',
        INGEST_IDLE_TIMEOUT: '5m',
      },
    });
    try {
      await waitForHttp(ingest, `http://127.0.0.1:${port}/readyz`, 60_000);
      const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
      const before = await settledRss(ingest.pid);
      const sockets: Socket[] = [];
      for (let i = 0; i < N; i++) {
        const s = connect(port, '127.0.0.1', () => state.bytes && s.write(state.bytes));
        s.on('error', () => {});
        sockets.push(s);
        if (i % 200 === 199) await sleep(20);
      }
      for (let i = 0; i < 200 && (await openConnections(metricsUrl)) < N; i++) await sleep(100);
      const open = await openConnections(metricsUrl);
      const after = await settledRss(ingest.pid);
      const perConnection = (after - before) / open;
      progress(
        `${state.name}: ${open} open, RSS ${(before / 2 ** 20).toFixed(1)} → ${(after / 2 ** 20).toFixed(1)} MiB`,
      );
      rows.push(
        `| ${state.name} | ${open} | ${(before / 2 ** 20).toFixed(1)} | ${(after / 2 ** 20).toFixed(1)} | ${(perConnection / 1024).toFixed(1)} |`,
      );
      for (const s of sockets) s.destroy();
    } finally {
      await ingest.stop();
    }
  }
} finally {
  await redis.close();
  keys.remove();
}
console.log(
  [
    '| connections held in state | open | RSS before, MiB | RSS after, MiB | KiB per connection |',
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n'),
);
