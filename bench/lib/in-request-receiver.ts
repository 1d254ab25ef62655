/**
 * `pnpm bench --only compare --compare-settlement`: an in-request receiver through OUR settlement path — our core's
 * decode, then `applyEvent` of @mcb/settlement (its look-ups, Get order, its credit transaction: about 1.9 Postgres
 * transactions a credit) inside the fastify handler, `success` only after the credit. It prices our own money path
 * run in the request. It is NOT the baseline a merchant writes first (that is lean-receiver.ts), and it was the
 * bench's baseline until 2026-11-26, which flattered the pipeline (issue 41).
 * Runs on all cores (node:cluster), 16 Postgres connections a process. Env: PORT, DATABASE_URL,
 * PLATFORM_BASE_URL, MERCHANT_NO, MERCHANT_PRIVATE_KEY_FILE.
 */
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { decodeCallbackDetailed, loadKeyRingFromFiles } from '@mcb/core/callback';
import { loadConfig } from '@mcb/core/config';
import { createDb } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient } from '@mcb/core/platform';
import { callbackJobSchema } from '@mcb/core/queue';
import { applyEvent } from '@mcb/settlement';
import Fastify from 'fastify';

const config = loadConfig(process.env, 'cli');
const port = Number(process.env.PORT);

if (cluster.isPrimary) {
  // Ready (every fork's /readyz answers 200) only once every fork listens: else the first would get every connection.
  const forks = availableParallelism();
  let listening = 0;
  cluster.on('listening', () => {
    if (++listening === forks) for (const w of Object.values(cluster.workers ?? {})) w?.send('ready');
  });
  for (let i = 0; i < forks; i++) cluster.fork();
  process.once('SIGTERM', () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM');
    process.exit(0);
  });
} else {
  const logger = createLogger({ name: 'in-request', level: 'warn' });
  const keyRing = loadKeyRingFromFiles(config.MERCHANT_PRIVATE_KEY_FILE!.split(','));
  const db = createDb(config.DATABASE_URL, { max: 16, applicationName: 'bench-in-request' });
  const platform = createPlatformClient({
    baseUrl: config.PLATFORM_BASE_URL!,
    merchantNo: config.MERCHANT_NO!,
    timeoutMs: 10_000,
  });
  const app = Fastify();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  let ready = false;
  process.on('message', (m) => (ready ||= m === 'ready'));
  app.get('/readyz', async (_req, reply) => (ready ? 'ok' : reply.code(503).send('starting')));
  app.post('/callbacks/payin', async (request, reply) => {
    let job;
    try {
      job = decodeCallbackDetailed(JSON.parse(String(request.body)), {
        keyRing,
        merchantNo: config.MERCHANT_NO!,
        expectedKind: 'payin',
      }).job;
    } catch {
      return reply.code(400).type('text/plain').send('fail');
    }
    try {
      const outcome = await applyEvent(callbackJobSchema.parse(job), { db: db.db, platform, logger });
      if (outcome.status === 'deferred') return reply.code(503).type('text/plain').send('fail');
      return reply.type('text/plain').send('success');
    } catch {
      return reply.code(503).type('text/plain').send('fail');
    }
  });
  await app.listen({ host: '127.0.0.1', port });
  process.once(
    'SIGTERM',
    () =>
      void app
        .close()
        .then(() => db.close())
        .then(() => process.exit(0)),
  );
}
