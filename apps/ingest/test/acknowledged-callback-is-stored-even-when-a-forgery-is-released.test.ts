import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { CALLBACKS_QUEUE, callbackJobId, type CallbackJobInput } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import {
  startRespProxy,
  uniquePrefix,
  deletePrefix,
  testServices,
  type CommandHook,
  type RespProxy,
} from '@mcb/testkit';
import { createEnqueuer, variantJobId } from '../src/enqueue.ts';

// The worker frees a reviewed forgery's job id (releaseReviewedJobIds) so that the genuine callback of the same pair
// can have it. Ingest adds the genuine record onto the id (a no-op while the forgery holds it) and reads back what
// the id holds, to tell "stored" from "another record is here". If the release lands between that add and that
// read-back, the id holds nothing, and a read-back that counts nothing as "mine" answers `success` for a record
// stored nowhere. These tests put the release exactly there, then at random moments around the enqueue.

const redisUrl = () => testServices().redisUrl;
const prefix = uniquePrefix('forged-race');
let admin: Redis;
let adminQueue: Queue;
const opened: Array<{ close(): Promise<unknown> | unknown }> = [];

beforeAll(() => {
  admin = new Redis(redisUrl());
  adminQueue = new Queue(CALLBACKS_QUEUE, { connection: admin, prefix });
});
afterAll(async () => {
  for (const o of opened.reverse()) await o.close();
  await adminQueue.close();
  admin.disconnect();
  await deletePrefix(redisUrl(), prefix);
});

let seq = 0;
type PayinInput = Extract<CallbackJobInput, { kind: 'payin' }>;
function pair(): { genuine: PayinInput; forged: PayinInput; jobId: string } {
  const orderNo = `PRACE${Date.now()}${seq++}`;
  const genuine: PayinInput = {
    kind: 'payin',
    orderNo,
    merchantNo: 'M100001',
    merchantOrderNo: `m-${orderNo}`,
    state: 6,
    payTime: null,
    quantity: '10',
    fiatAmount: '100',
    receivedAt: new Date().toISOString(),
  };
  const forged = { ...genuine, fiatAmount: '100000', receivedAt: new Date(Date.now() - 1000).toISOString() };
  return { genuine, forged, jobId: callbackJobId('payin', orderNo, 6) };
}

/** Whether the genuine record is stored: under the contract id, or under its own variant id. */
async function genuineStored(genuine: PayinInput, jobId: string): Promise<boolean> {
  for (const id of [jobId, variantJobId(jobId, genuine)]) {
    const data = await admin.hget(`${prefix}:${CALLBACKS_QUEUE}:${id}`, 'data');
    if (data && (JSON.parse(data) as PayinInput).fiatAmount === genuine.fiatAmount) return true;
  }
  return false;
}

/** An enqueuer whose queue connection crosses a proxy that lets the test act at an exact command. */
async function enqueuerThrough(hook: CommandHook) {
  const proxy: RespProxy = await startRespProxy(redisUrl(), hook);
  const redis = createRedis(proxy.url, 'producer', { connectionName: 'forged-race' });
  redis.on('error', () => {});
  const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix });
  opened.push(proxy, { close: () => redis.disconnect() }, queue);
  return createEnqueuer(queue, redis, { timeoutMs: 3000 });
}

describe('an acknowledged callback is stored even when a forgery of its pair is released at the same moment', () => {
  it('the release lands between the add and the read-back (driven at the read-back command): success means stored', async () => {
    const { genuine, forged, jobId } = pair();
    await adminQueue.add('payin', forged, { jobId });
    let released = 0;
    const enqueuer = await enqueuerThrough(async (args) => {
      // 1. The add has been sent; before the read-back reaches Redis, the worker frees the forgery's id.
      if (args[0] === 'HGET' && args[1]?.endsWith(`:${jobId}`) && released === 0) {
        released++;
        await adminQueue.remove(jobId);
      }
      return { forward: true };
    });
    // 2. The genuine callback is acknowledged...
    await expect(enqueuer.enqueue(genuine, { check: 'none' })).resolves.toBe(jobId);
    expect(released).toBe(1);
    // 3. ...so it must be stored.
    expect(await genuineStored(genuine, jobId)).toBe(true);
  });

  it('a read-back cut off by a lost connection is never taken as stored', async () => {
    const { genuine, forged, jobId } = pair();
    await adminQueue.add('payin', forged, { jobId });
    let cuts = 0;
    const enqueuer = await enqueuerThrough((args) => {
      if (args[0] === 'HGET' && args[1]?.endsWith(`:${jobId}`) && cuts === 0) {
        cuts++;
        return { cut: true };
      }
      return { forward: true };
    });
    const outcome = await enqueuer.enqueue(genuine, { check: 'none' }).then(
      () => 'acknowledged',
      (e: { code?: string }) => e.code,
    );
    expect(cuts).toBe(1);
    // Either the enqueue failed (503 fail: the platform retries) or, if the client resent it after reconnecting,
    // the record really is stored. Never "acknowledged" with the forgery still holding the only copy of the id.
    if (outcome === 'acknowledged') expect(await genuineStored(genuine, jobId)).toBe(true);
    else expect(outcome).toBe('ENQUEUE_FAILED');
  });

  it('a read-back that Redis answers with an error fails the enqueue (503 fail), never counts as stored', async () => {
    const { genuine, forged, jobId } = pair();
    await adminQueue.add('payin', forged, { jobId });
    const enqueuer = await enqueuerThrough((args) =>
      args[0] === 'HGET' && args[1]?.endsWith(`:${jobId}`)
        ? { reply: new Error('ERR injected read-back failure') }
        : { forward: true },
    );
    await expect(enqueuer.enqueue(genuine, { check: 'none' })).rejects.toMatchObject({ code: 'ENQUEUE_FAILED' });
    expect(await genuineStored(genuine, jobId)).toBe(false);
  });

  it('randomised: 300 releases fired 0-600 µs after the enqueue starts lose no acknowledged callback', async () => {
    const redis = createRedis(redisUrl(), 'producer', { connectionName: 'forged-race-stress' });
    const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix });
    opened.push({ close: () => redis.disconnect() }, queue);
    const enqueuer = createEnqueuer(queue, redis, { timeoutMs: 3000 });
    const spin = (us: number) => {
      const end = process.hrtime.bigint() + BigInt(Math.round(us * 1000));
      return new Promise<void>((resolve) => {
        const step = () => (process.hrtime.bigint() >= end ? resolve() : setImmediate(step));
        step();
      });
    };
    let acknowledged = 0;
    let lost = 0;
    for (let i = 0; i < 300; i++) {
      const { genuine, forged, jobId } = pair();
      await adminQueue.add('payin', forged, { jobId });
      const enqueued = enqueuer.enqueue(genuine, { check: 'none' }).then(
        () => true,
        () => false,
      );
      // The worker's release, as it really happens: only the reviewed forgery is removed.
      await spin(Math.random() * 600);
      const held = await admin.hget(`${prefix}:${CALLBACKS_QUEUE}:${jobId}`, 'data');
      if (held && (JSON.parse(held) as PayinInput).fiatAmount === forged.fiatAmount) await adminQueue.remove(jobId);
      if (await enqueued) {
        acknowledged++;
        if (!(await genuineStored(genuine, jobId))) lost++;
      }
    }
    expect(acknowledged).toBe(300);
    expect(lost).toBe(0);
  });
});
