import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payinEvent, uid, useTestEnv } from '@mcb/testkit';
import { bearer, OPERATORS } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
const JOBS = 60;

beforeAll(async () => {
  stack = await startOpsStack(env, { consoleDeps: { operators: OPERATORS } }); // no worker: the jobs stay waiting
  const no = uid();
  for (let i = 0; i < JOBS; i++) {
    await stack.add(payinEvent({ orderNo: `P-${no}-${i}`, merchantOrderNo: `MO-${no}-${i}`, fiatAmount: '5.00' }));
  }
});
afterAll(async () => {
  await stack?.close();
});

type Board = { queues: { name: string; jobs: unknown[]; pagination: { pageCount: number } }[] };

async function page(jobsPerPage: string, role: 'viewer' | 'operator' | 'admin' = 'viewer') {
  const res = await stack.app.inject({
    method: 'GET',
    url: `/queues/api/queues?activeQueue=callbacks&status=waiting&page=1&jobsPerPage=${jobsPerPage}`,
    headers: bearer(role),
  });
  const callbacks = res.statusCode === 200 ? (res.json() as Board).queues.find((q) => q.name === 'callbacks') : null;
  return { status: res.statusCode, jobs: callbacks?.jobs.length, pages: callbacks?.pagination.pageCount };
}

describe("bull-board's page of jobs is bounded for every role", () => {
  it('jobsPerPage=100000 (or 1e5, or 0x186a0) lists 50 jobs, for a viewer, an operator and an admin', async () => {
    for (const role of ['viewer', 'operator', 'admin'] as const) {
      expect(await page('100000', role)).toEqual({ status: 200, jobs: 50, pages: 2 });
    }
    expect(await page('1e5')).toEqual({ status: 200, jobs: 50, pages: 2 });
    expect(await page('0x186a0')).toEqual({ status: 200, jobs: 50, pages: 2 });
  });

  it('a page within the bound is served as asked; what is not a number is still refused by bull-board', async () => {
    expect(await page('10')).toEqual({ status: 200, jobs: 10, pages: 6 });
    expect(await page('50')).toEqual({ status: 200, jobs: 50, pages: 2 });
    expect((await page('lots')).status).toBe(400);
  });
});
