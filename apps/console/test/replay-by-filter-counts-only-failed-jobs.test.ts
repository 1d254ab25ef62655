import { callbackArrivals } from '@mcb/core/db';
import { uid, useTestEnv } from '@mcb/testkit';
import { beforeAll, describe, expect, it } from 'vitest';
import { countCandidates, replayCandidates } from '../src/replays/plan.ts';

// A replay by filter re-runs jobs that failed for good. Its total, its dry run and its candidates must never count
// callbacks that were applied, duplicates, reviews or still retrying: a filter without a status (an amount range,
// an order family) would otherwise report applied callbacks as work to replay.
const env = useTestEnv();
const tag = `RF-${uid()}`;
const statuses = ['applied', 'duplicate', 'review', 'retrying', 'waiting', 'active', 'failed'] as const;

beforeAll(async () => {
  const base = Date.parse('2026-02-01T00:00:00.000Z');
  // 21 pay-ins of one order family, three of each status; only the three failed ones are replayable.
  await env.db.db.insert(callbackArrivals).values(
    Array.from({ length: 21 }, (_, i) => ({
      jobId: `payin-${tag}-${String(i).padStart(2, '0')}-6`,
      kind: 'payin' as const,
      orderNo: `${tag}-${i}`,
      state: 6,
      merchantOrderNo: `${tag}-M`,
      amount: '10.00',
      receivedAt: new Date(base + i * 1000),
      firstSeenAt: new Date(base + i * 1000),
      updatedAt: new Date(base + i * 1000),
      attempts: 1,
      status: statuses[i % statuses.length]!,
      lastCode: 'PLATFORM_HTTP_ERROR',
    })),
  );
});

describe('replay by filter', () => {
  it('counts and lists only the failed jobs of a filter that names no status', async () => {
    for (const filter of [
      { merchantOrderNo: `${tag}-M` },
      { amountMin: '10', amountMax: '10', merchantOrderNo: `${tag}-M` },
      { code: 'PLATFORM_HTTP_ERROR', merchantOrderNo: `${tag}-M` },
    ]) {
      expect(await countCandidates(env.db.db, filter)).toBe(3);
      const rows = await replayCandidates(env.db.db, filter, null, 100);
      expect(rows.map((r) => r.jobId)).toEqual(['06', '13', '20'].map((i) => `payin-${tag}-${i}-6`));
    }
  });

  it('refuses a filter that asks for another status, and takes "failed" as it is', async () => {
    await expect(countCandidates(env.db.db, { merchantOrderNo: `${tag}-M`, status: 'applied' })).rejects.toMatchObject({
      code: 'REQUEST_INVALID',
    });
    expect(await countCandidates(env.db.db, { merchantOrderNo: `${tag}-M`, status: 'failed' })).toBe(3);
  });
});
