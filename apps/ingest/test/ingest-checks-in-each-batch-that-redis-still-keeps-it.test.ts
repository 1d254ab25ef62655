import { afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { startRespProxy, uniquePrefix, waitFor, type CommandHook, type RespProxy, type RespValue } from '@mcb/testkit';
import {
  captureLogger,
  DURABLE_REDIS_ARGS,
  MERCHANT_NO,
  startIngest,
  startOwnRedis,
  type OwnRedis,
  type TestIngest,
} from '@mcb/testkit/ingest';

// Acknowledgements stop the moment Redis stops keeping them: each enqueue batch proves durability itself, instead of
// trusting a poll that re-reads the settings every few seconds. Every test here runs ingest with that poll an hour
// apart, so whatever refuses a callback right after Redis changed is the batch's own check. Each test starts its own
// redis-server (CONFIG SET on the shared one is forbidden) and, where it needs a newer Redis than Debian's 7.0, a
// proxy in front of it plays the newer server's part (WAITAOF), answering as Redis 7.2 does.

const keys = generateKeyPair();
const keyRing = loadKeyRing([keys.privateKeyPem]);
const AN_HOUR = 3_600_000;
const open: Array<{ close(): Promise<void> | void }> = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

async function ownRedis(args: string[] = DURABLE_REDIS_ARGS): Promise<{ server: OwnRedis; admin: Redis }> {
  const server = await startOwnRedis(args);
  open.push({ close: () => server.destroy() });
  const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
  open.push({ close: () => admin.disconnect() });
  return { server, admin };
}

async function proxy(target: string, hook: CommandHook): Promise<RespProxy> {
  const p = await startRespProxy(target, hook);
  open.push(p);
  return p;
}

async function ingestOn(redisUrl: string, opts: { durabilityCheckIntervalMs?: number } = {}) {
  const { logger, lines } = captureLogger();
  const ingest = await startIngest({
    redisUrl,
    prefix: uniquePrefix('batchdur'),
    keyRing,
    logger,
    durabilityCheckIntervalMs: opts.durabilityCheckIntervalMs ?? AN_HOUR,
    memoryCheckIntervalMs: AN_HOUR,
  });
  open.push(ingest);
  return { ingest, lines };
}

const callback = (orderNo: string) =>
  JSON.stringify({
    encryptedData: encryptRecord(
      { OrderNo: orderNo, MerchantNo: MERCHANT_NO, MerchantOrderNo: `m-${orderNo}`, PayTime: null, state: 4 },
      keys.publicKeyPem,
    ),
  });
const post = (ingest: TestIngest, orderNo: string) =>
  ingest.app
    .inject({
      method: 'POST',
      url: '/callbacks',
      headers: { 'content-type': 'application/json' },
      payload: callback(orderNo),
    })
    .then((r) => `${r.statusCode} ${r.body}`);
/** The platform's way: send until `success` (the first send can miss the 1 s budget on a loaded machine). */
const acknowledged = (ingest: TestIngest, orderNo: string) =>
  waitFor(async () => (await post(ingest, orderNo)) === '200 success', {
    timeoutMs: 15_000,
    intervalMs: 100,
    message: `${orderNo} never acknowledged`,
  });
const readiness = async (ingest: TestIngest) => (await ingest.app.inject({ method: 'GET', url: '/readyz' })).statusCode;
const refusedLine = (lines: string[]) => lines.find((l) => l.includes('a batch found that Redis does not keep it now'));

/** COMMAND INFO WAITAOF as Redis 7.2 answers it. */
const WAITAOF_INFO: RespValue = [[Buffer.from('waitaof'), 4, [Buffer.from('noscript')], 0, 0, 0]];

/**
 * A proxy that makes a Redis 7.0 look like 7.2: WAITAOF exists, and answers as 7.2 does, from the real server's
 * state: an error when AOF is off, else the local fsync (appendfsync always: already done).
 */
async function asRedis72(server: OwnRedis, admin: Redis): Promise<RespProxy> {
  return proxy(server.url, async (args) => {
    if (args[0] === 'COMMAND' && args[1]?.toUpperCase() === 'INFO' && args[2]?.toUpperCase() === 'WAITAOF')
      return { reply: WAITAOF_INFO };
    if (args[0] === 'WAITAOF') {
      const [, appendonly] = (await admin.call('CONFIG', 'GET', 'appendonly')) as string[];
      return {
        reply:
          appendonly === 'yes'
            ? [1, 0]
            : new Error('ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.'),
      };
    }
    return { forward: true };
  });
}

describe('on Redis 7.0 (no WAITAOF) with appendfsync always: the settings are read inside each batch transaction', () => {
  it('acknowledges while AOF is on; once AOF is turned off at run time, the very next callback is refused and readiness follows', async () => {
    const { server, admin } = await ownRedis();
    // Every command ingest sends, in order: the check must sit inside the batch's MULTI/EXEC, not beside it.
    const sent: string[] = [];
    const p = await proxy(server.url, (args) => {
      sent.push(args[0] === 'CONFIG' ? `CONFIG ${args.slice(1).join(' ')}` : args[0]!);
      return { forward: true };
    });
    const { ingest, lines } = await ingestOn(p.url);
    expect((await ingest.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
      checks: { durability: 'aof-always' },
    });

    sent.length = 0;
    await acknowledged(ingest, 'BD-ON');
    const multi = sent.indexOf('MULTI');
    const exec = sent.indexOf('EXEC');
    expect(multi).toBeGreaterThanOrEqual(0);
    expect(sent.slice(multi, exec)).toContain('CONFIG GET appendonly appendfsync maxmemory-policy');
    // No round trip added: nothing but the transaction itself.
    expect(sent.filter((c, i) => (i < multi || i > exec) && c.startsWith('CONFIG'))).toEqual([]);

    await admin.call('CONFIG', 'SET', 'appendonly', 'no');
    expect(await post(ingest, 'BD-OFF')).toBe('503 fail');
    expect(refusedLine(lines)).toMatch(/appendonly is \\"no\\"/);
    // The poll is an hour away: the refused batch itself asked for the re-read.
    await waitFor(async () => (await readiness(ingest)) === 503, {
      timeoutMs: 5000,
      message: '/readyz still ready with AOF off',
    });
    expect((await ingest.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
      checks: { durability: 'not durable' },
    });
    expect(await post(ingest, 'BD-OFF')).toBe('503 fail');
  });

  it('refuses once appendfsync is relaxed at run time (no WAITAOF to wait for the fsync)', async () => {
    const { server, admin } = await ownRedis();
    const { ingest, lines } = await ingestOn(server.url);
    await acknowledged(ingest, 'BD-FS1');
    await admin.call('CONFIG', 'SET', 'appendfsync', 'everysec');
    expect(await post(ingest, 'BD-FS2')).toBe('503 fail');
    expect(refusedLine(lines)).toMatch(/appendfsync is \\"everysec\\" and this Redis has no WAITAOF/);
  });

  it('acknowledges the platform retry once AOF is back (the refused batch was never acknowledged)', async () => {
    const { server, admin } = await ownRedis();
    const { ingest } = await ingestOn(server.url, { durabilityCheckIntervalMs: 200 });
    await admin.call('CONFIG', 'SET', 'appendonly', 'no');
    expect(await post(ingest, 'BD-BACK')).toBe('503 fail');
    await admin.call('CONFIG', 'SET', 'appendonly', 'yes');
    // Turning AOF on starts a rewrite; until it is done Redis has not switched it on (the batch check reads "yes"
    // from then on, and the poll restores early acceptance).
    await acknowledged(ingest, 'BD-BACK');
    expect((await ingest.queue.getJob('payout-BD-BACK-4'))?.data.orderNo).toBe('BD-BACK');
  });
});

describe('on Redis 7.2+ (WAITAOF): every batch waits for WAITAOF, whatever appendfsync is', () => {
  it('waits for WAITAOF with appendfsync always too, and refuses the next callback once AOF is off (WAITAOF errors)', async () => {
    const { server, admin } = await ownRedis();
    const p = await asRedis72(server, admin);
    const { ingest, lines } = await ingestOn(p.url);
    const before = p.counts.get('WAITAOF') ?? 0;
    await acknowledged(ingest, 'BD72-ON');
    expect((p.counts.get('WAITAOF') ?? 0) - before).toBeGreaterThanOrEqual(1);
    // Where WAITAOF proves each batch, no CONFIG GET rides in the transaction.
    const configs = p.counts.get('CONFIG') ?? 0;

    await admin.call('CONFIG', 'SET', 'appendonly', 'no');
    expect(await post(ingest, 'BD72-OFF')).toBe('503 fail');
    expect(refusedLine(lines)).toMatch(
      /WAITAOF refused: ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled/,
    );
    await waitFor(async () => (await readiness(ingest)) === 503, {
      timeoutMs: 5000,
      message: '/readyz still ready with AOF off',
    });
    // The re-read is the only CONFIG traffic (three reads of the start-up check's kind), none per batch.
    expect((p.counts.get('CONFIG') ?? 0) - configs).toBe(3);
  });
});

describe('where CONFIG is renamed or disabled (some managed Redis services)', () => {
  const renamed = [...DURABLE_REDIS_ARGS, '--rename-command', 'CONFIG', 'hidden-config-i37'];

  it('on Redis without WAITAOF, ingest refuses to start: it could not check each batch (fail closed, and says why)', async () => {
    const { server } = await ownRedis(renamed);
    const err = await startIngest({ redisUrl: server.url, prefix: uniquePrefix('noconfig'), keyRing }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe(ErrorCodes.REDIS_NOT_DURABLE);
    expect((err as AppError).message).toMatch(/CONFIG GET is not allowed on this Redis .* and it has no WAITAOF/);
  });

  it('with WAITAOF, ingest starts and each batch waits for WAITAOF (no CONFIG needed)', async () => {
    const { server } = await ownRedis(renamed);
    const admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    open.push({ close: () => admin.disconnect() });
    // The proxy's WAITAOF reads appendonly through the renamed command.
    const p = await proxy(server.url, async (args) => {
      if (args[0] === 'COMMAND' && args[1]?.toUpperCase() === 'INFO' && args[2]?.toUpperCase() === 'WAITAOF')
        return { reply: WAITAOF_INFO };
      if (args[0] === 'WAITAOF') {
        const [, appendonly] = (await admin.call('hidden-config-i37', 'GET', 'appendonly')) as string[];
        return {
          reply:
            appendonly === 'yes'
              ? [1, 0]
              : new Error('ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.'),
        };
      }
      return { forward: true };
    });
    const { ingest } = await ingestOn(p.url);
    expect((await ingest.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
      checks: { durability: 'waitaof' },
    });
    await acknowledged(ingest, 'BD-NC1');
    expect(p.counts.get('WAITAOF')).toBeGreaterThanOrEqual(1);
    await admin.call('hidden-config-i37', 'SET', 'appendonly', 'no');
    expect(await post(ingest, 'BD-NC2')).toBe('503 fail');
  });
});
