import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect } from 'vitest';
import { createLogger } from '@mcb/core/logger';
import { createOrder, payinEvent, platformOrder, uid, waitFor } from '@mcb/testkit';
import { workerTest } from '@mcb/testkit/worker';
import { createAlerter } from '../src/alerts.ts';

/** A webhook receiver the test scripts: it answers `status`, or nothing while `hang`. */
interface Hook {
  server: Server;
  url: string;
  received: Record<string, unknown>[];
  status: number;
  hang: boolean;
}
const logger = createLogger({ name: 'alerts-test', level: 'silent' });

const it = workerTest
  .extend('hook', { scope: 'file' }, async ({ services: _services }, { onCleanup }): Promise<Hook> => {
    const received: Record<string, unknown>[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (hook.hang) return; // never answers: the alerter's deadline must end it
        received.push(JSON.parse(body) as Record<string, unknown>);
        res.writeHead(hook.status).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const hook: Hook = {
      server,
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/alerts`,
      received,
      status: 204,
      hang: false,
    };
    onCleanup(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });
    return hook;
  })
  .extend('alerts', { scope: 'file' }, ({ hook }, { onCleanup }) => {
    const alerts = createAlerter({ url: hook.url, logger, timeoutMs: 300 });
    onCleanup(() => alerts.close());
    return alerts;
  })
  .extend('harnessOptions', { scope: 'file' }, ({ alerts }) => ({ alerts }));

const alertsFor = (hook: Hook, orderNo: string) => hook.received.filter((m) => m.orderNo === orderNo);

describe('alerts', () => {
  it('sends one message when a job exhausts its attempts, and the job stays in the failed list', async ({
    env,
    platform,
    h,
    hook,
    alerts,
  }) => {
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-${no}`, `P-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '10.00' });
    platform.failNext(merchantOrderNo, 1_000, 500);
    const event = payinEvent({ orderNo, merchantOrderNo, fiatAmount: '10.00' });
    const job = await h.queue.add(event.kind, event, {
      jobId: `payin-${orderNo}-6`,
      attempts: 3,
      backoff: { type: 'callback-backoff' },
    });
    await h.settled(job.id!);
    expect(await h.queue.getJobState(job.id!)).toBe('failed');
    expect((await h.queue.getFailed()).map((j) => j.id)).toContain(job.id);
    await waitFor(() => alertsFor(hook, orderNo).length > 0, { message: 'no alert' });
    await alerts.close();
    const sent = alertsFor(hook, orderNo);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      type: 'job.exhausted',
      jobId: job.id,
      orderNo,
      merchantOrderNo,
      state: 6,
      attemptsMade: 3,
      source: 'worker',
    });
    expect(String(sent[0]!.reason)).toMatch(/HTTP 500/);
    // Nothing of the record's amounts travels in the alert.
    expect(JSON.stringify(sent[0])).not.toContain('17.3');
    platform.failNext(merchantOrderNo, 0, 500);
  });

  it('sends one message when a review is opened, none when the same event lands on the open review again', async ({
    env,
    platform,
    h,
    hook,
    alerts,
  }) => {
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-${no}`, `P-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '10.00' });
    platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '11.00' }));
    const event = payinEvent({ orderNo, merchantOrderNo, fiatAmount: '10.00' });
    await h.settled((await h.add(event)).id!);
    // The same pair again (as a reconciliation sweep or a replay would bring it): occurrences 2, no new alert.
    await h.settled((await h.add(event, `again-${orderNo}`)).id!);
    await alerts.close();
    const sent = alertsFor(hook, orderNo);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      type: 'review.opened',
      orderNo,
      merchantOrderNo,
      state: 6,
      code: 'VERIFY_AMOUNT_MISMATCH',
      kind: 'payin',
    });
  });

  it('never holds up or fails the job path when the webhook hangs or refuses', async ({
    env,
    platform,
    h,
    hook,
    alerts,
  }) => {
    hook.hang = true;
    try {
      const no = uid();
      const [merchantOrderNo, orderNo] = [`MO-${no}`, `P-${no}`];
      await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '10.00' });
      platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '12.00' }));
      const started = Date.now();
      const job = await h.settled((await h.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '10.00' }))).id!);
      expect(job.returnvalue).toMatchObject({ status: 'review' });
      expect(Date.now() - started).toBeLessThan(2000);
      await alerts.close(); // bounded by the 300 ms deadline
    } finally {
      hook.hang = false;
    }
    hook.status = 500;
    const refused = createAlerter({ url: hook.url, logger, timeoutMs: 300 });
    refused.notify({
      type: 'review.opened',
      reviewId: 1,
      kind: 'payin',
      orderNo: 'X',
      state: 6,
      merchantOrderNo: 'Y',
      code: 'C',
      reason: 'r',
    });
    await expect(refused.close()).resolves.toBeUndefined();
    const unreachable = createAlerter({ url: 'http://127.0.0.1:1/alerts', logger, timeoutMs: 300 });
    unreachable.notify({
      type: 'review.opened',
      reviewId: 1,
      kind: 'payin',
      orderNo: 'X',
      state: 6,
      merchantOrderNo: 'Y',
      code: 'C',
      reason: 'r',
    });
    await expect(unreachable.close()).resolves.toBeUndefined();
    hook.status = 204;
  });

  it('aggregates a flood of reviews into one message per window, so a job.exhausted alert is never crowded out', async ({
    hook,
  }) => {
    const flood = createAlerter({ url: hook.url, logger, timeoutMs: 1000, reviewWindowMs: 60_000, maxInFlight: 100 });
    const before = hook.received.length;
    for (let i = 0; i < 300; i++) {
      flood.notify({
        type: 'review.opened',
        reviewId: 10_000 + i,
        kind: 'payin',
        orderNo: `FLOOD-${i}`,
        state: 6,
        merchantOrderNo: `M-FLOOD-${i}`,
        code: i % 3 ? 'VERIFY_ORDER_UNKNOWN' : 'VERIFY_AMOUNT_MISMATCH',
        reason: 'forged',
      });
    }
    flood.notify({
      type: 'job.exhausted',
      queue: 'callbacks',
      jobId: 'payin-GENUINE-6',
      jobName: 'payin',
      orderNo: 'GENUINE',
      state: 6,
      attemptsMade: 60,
      reason: 'DB_UNAVAILABLE: x',
    });
    await flood.close(); // ends the window: its summary goes out now
    const sent = hook.received.slice(before);
    expect(sent.map((m) => m.type).sort()).toEqual(['job.exhausted', 'review.opened', 'reviews.opened']);
    expect(sent.find((m) => m.type === 'review.opened')).toMatchObject({ reviewId: 10_000, orderNo: 'FLOOD-0' });
    expect(sent.find((m) => m.type === 'reviews.opened')).toMatchObject({
      count: 299,
      byCode: { VERIFY_ORDER_UNKNOWN: 200, VERIFY_AMOUNT_MISMATCH: 99 },
    });
    expect(sent.find((m) => m.type === 'job.exhausted')).toMatchObject({ jobId: 'payin-GENUINE-6' });
  });
});
