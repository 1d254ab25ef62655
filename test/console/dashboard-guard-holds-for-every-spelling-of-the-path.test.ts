import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorActions } from '@mcb/core/db';
import { createRedis } from '@mcb/core/redis';
import { payinEvent, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { UnrecoverableError, Worker } from 'bullmq';
import { eq } from 'drizzle-orm';
import { bearer, OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let jobId: string;
const cookies: Partial<Record<'viewer' | 'operator', string>> = {};

async function failWaitingJobs() {
  const connection = createRedis(env.redisUrl, 'worker');
  const worker = new Worker(
    'callbacks',
    async () => {
      throw new UnrecoverableError('PLATFORM_HTTP_ERROR: scripted');
    },
    { connection, prefix: env.prefix },
  );
  try {
    await waitFor(async () => (await stack.queue.getJobState(jobId)) === 'failed', { message: 'job did not fail' });
  } finally {
    await worker.close();
    await connection.quit();
  }
}

async function loginAs(role: 'viewer' | 'operator') {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/login',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      origin: 'http://console.test',
      host: 'console.test',
    },
    payload: new URLSearchParams({ token: TOKENS[role], next: '/queues' }).toString(),
  });
  expect(res.statusCode).toBe(303);
  return String(res.headers['set-cookie']).split(';')[0]!;
}

beforeAll(async () => {
  stack = await startOpsStack(env, { consoleDeps: { operators: OPERATORS } });
  const no = uid();
  jobId = await stack.add(payinEvent({ orderNo: `P-${no}`, merchantOrderNo: `MO-${no}`, fiatAmount: '5.00' }));
  await failWaitingJobs();
  cookies.viewer = await loginAs('viewer');
  cookies.operator = await loginAs('operator');
});
afterAll(async () => {
  await stack?.close();
});

/** Ways to spell one bull-board path that a raw-URL check would not recognise. */
const spellings = (rest: string) => [
  `/queues${rest}`,
  `/%71ueues${rest}`,
  `/queue%73${rest}`,
  `/%71%75%65%75%65%73${rest}`,
  `/%71ueues${rest.replace('/api/', '/%61pi/')}`,
  `/QUEUES${rest}`,
  `/Queues${rest}`,
  `/queues/.${rest}`,
  `/queues/x/..${rest}`,
  `/./queues${rest}`,
  `/queues${rest}/`,
  `//queues${rest}`,
  `/queues/${rest}`,
  `/queues${rest.replace('/api/queues/', '/api//queues/')}`,
  `/queues/%2e${rest}`,
  `/queues/x/%2e%2e${rest}`,
  `/queues${rest.replaceAll('/', '%2F')}`,
  `/queues${rest.replace('/api/queues/', '/api/queues%2F')}`,
  `/queues${rest}?x=1`,
  `/queues${rest}#frag`,
  `/queues${rest.toUpperCase()}`,
];

const credentials = (role: 'viewer' | 'operator') => [
  ['bearer', bearer(role)] as const,
  ['session', { cookie: cookies[role]!, origin: 'http://console.test', host: 'console.test' }] as const,
];

/** bull-board's own route table (the console's copy of @bull-board/api), so a route a new version adds is tested too. */
const bullBoardRoutes = (): { method: string; route: string }[] => {
  const require = createRequire(new URL('../../apps/console/package.json', import.meta.url));
  const { appRoutes } = require('@bull-board/api/dist/routes.js') as {
    appRoutes: { api: { method: string; route: string | string[] }[] };
  };
  return appRoutes.api.flatMap((r) =>
    (Array.isArray(r.route) ? r.route : [r.route]).map((route) => ({ method: r.method.toUpperCase(), route })),
  );
};
const ALLOWED = new Set([
  'PUT /api/queues/:queueName/:jobId/retry',
  'PUT /api/queues/:queueName/:jobId/promote',
  'PUT /api/queues/:queueName/promote',
]);

describe('the dashboard guard decides by the route matched, not by the raw URL', () => {
  it('refuses every non-GET bull-board route that is not on the allow-list, for every role, plain or encoded (deny by default)', async () => {
    const changing = bullBoardRoutes().filter((r) => r.method !== 'GET' && !ALLOWED.has(`${r.method} ${r.route}`));
    expect(changing.length).toBeGreaterThan(15);
    const before = await stack.queue.getJobCounts();
    const fill = (route: string) =>
      route
        .replace(':queueName', 'callbacks')
        .replace(':jobId', jobId)
        .replace(':queueStatus', 'failed')
        .replace(':schedulerId', 'none');
    for (const role of ['viewer', 'operator', 'admin'] as const) {
      for (const r of changing) {
        const rest = fill(r.route);
        for (const url of [`/queues${rest}`, `/%71ueues${rest}`, `/queue%73${rest}`]) {
          const res = await stack.app.inject({
            method: r.method as 'PUT',
            url,
            headers: { ...bearer(role), 'x-reason': 'trying' },
            payload: {},
          });
          expect(res.statusCode, `${role} ${r.method} ${url}: ${res.body}`).toBe(403);
        }
      }
    }
    expect(await stack.queue.getJobCounts()).toEqual(before);
    expect(await stack.queue.isPaused()).toBe(false);
  });

  for (const role of ['viewer', 'operator'] as const) {
    it(`refuses pause, resume, clean, update-data, add, remove and empty for a ${role}, whatever the spelling (bearer and session)`, async () => {
      const rowsBefore = (await env.db.db.select().from(operatorActions)).length;
      const refused = [
        { method: 'PUT' as const, rest: '/api/queues/callbacks/pause' },
        { method: 'PUT' as const, rest: '/api/queues/pause' },
        { method: 'PUT' as const, rest: `/api/queues/callbacks/${jobId}/clean` },
        {
          method: 'PATCH' as const,
          rest: `/api/queues/callbacks/${jobId}/update-data`,
          payload: { data: { fiatAmount: '1' } },
        },
        { method: 'POST' as const, rest: '/api/queues/callbacks/add', payload: { name: 'sweep', data: {} } },
        { method: 'PUT' as const, rest: '/api/queues/callbacks/empty' },
        { method: 'PUT' as const, rest: '/api/queues/callbacks/clean/failed' },
      ];
      const before = await stack.queue.getJobCounts();
      for (const [how, headers] of credentials(role)) {
        for (const r of refused) {
          for (const url of spellings(r.rest)) {
            const res = await stack.app.inject({ method: r.method, url, payload: r.payload, headers });
            // 403 where the spelling reaches bull-board's route; 404 where the router does not take it as that route.
            expect([403, 404], `${how} ${r.method} ${url}: ${res.body}`).toContain(res.statusCode);
            expect(await stack.queue.isPaused(), `${how} ${r.method} ${url}`).toBe(false);
          }
          // The spellings the issue found: the router takes them as the route, and the guard refuses them.
          for (const url of [`/%71ueues${r.rest}`, `/queue%73${r.rest}`]) {
            const res = await stack.app.inject({ method: r.method, url, payload: r.payload, headers });
            expect(res.statusCode, `${how} ${r.method} ${url}`).toBe(403);
            expect(res.json()).toMatchObject({ code: 'FORBIDDEN' });
          }
        }
      }
      expect(await stack.queue.getJobCounts()).toEqual(before);
      expect(await stack.queue.getJobState(jobId)).toBe('failed');
      expect((await env.db.db.select().from(operatorActions)).length).toBe(rowsBefore);
    });
  }

  it('checks an allowed action reached by an encoded path like the plain one: a viewer is refused, an operator needs a reason and leaves an audit row', async () => {
    const url = `/%71ueues/api/queues/callbacks/${jobId}/retry`;
    for (const [how, headers] of credentials('viewer')) {
      const res = await stack.app.inject({ method: 'PUT', url, headers: { ...headers, 'x-reason': 'just looking' } });
      expect(res.statusCode, how).toBe(403);
      expect(res.json()).toMatchObject({ requiredRole: 'operator' });
    }
    const operatorHeaders = bearer('operator');
    const bare = await stack.app.inject({ method: 'PUT', url, headers: operatorHeaders });
    expect(bare.statusCode).toBe(400);
    expect(await stack.queue.getJobState(jobId)).toBe('failed');

    const ok = await stack.app.inject({
      method: 'PUT',
      url: `/queue%73/api/queues/callbacks/${jobId}/retry`,
      headers: { ...operatorHeaders, 'x-reason': 'cause fixed' },
    });
    expect(ok.statusCode).toBe(204);
    expect(await stack.queue.getJobState(jobId)).toBe('waiting');
    // The intent row is written before bull-board acts, and completed once it has answered.
    const rows = await waitFor(async () => {
      const all = await env.db.db.select().from(operatorActions).where(eq(operatorActions.action, 'queue.retry'));
      return all.some((r) => r.outcome === 'done') ? all : undefined;
    });
    expect(rows.filter((r) => r.outcome !== 'denied')).toEqual([
      expect.objectContaining({
        operator: 'otto.operator@example.com',
        target: `job:callbacks/${jobId}`,
        reason: 'cause fixed',
      }),
    ]);
    await failWaitingJobs();
  });

  it('gives a viewer a read-only board without stack traces or workers, whatever the spelling, and an operator a board that acts', async () => {
    for (const url of [
      '/queues/api/queues?activeQueue=callbacks&status=failed&page=1&jobsPerPage=10',
      '/%71ueues/api/queues?activeQueue=callbacks&status=failed&page=1&jobsPerPage=10',
    ]) {
      for (const [how, headers] of credentials('viewer')) {
        const res = await stack.app.inject({ method: 'GET', url, headers });
        expect(res.statusCode, `${how} ${url}`).toBe(200);
        const body = res.json() as {
          queues: { name: string; readOnlyMode: boolean; jobs: { stacktrace: unknown[] }[] }[];
        };
        expect(body.queues.length).toBeGreaterThan(0);
        for (const q of body.queues) expect(q.readOnlyMode, `${how} ${url} ${q.name}`).toBe(true);
        const jobs = body.queues.flatMap((q) => q.jobs);
        expect(jobs.length).toBeGreaterThan(0);
        for (const j of jobs) expect(j.stacktrace).toEqual([]);
      }
    }
    const op = await stack.app.inject({
      method: 'GET',
      url: '/queues/api/queues?activeQueue=callbacks&status=failed&page=1&jobsPerPage=10',
      headers: bearer('operator'),
    });
    const opQueues = (op.json() as { queues: { readOnlyMode: boolean; jobs: { stacktrace: unknown[] }[] }[] }).queues;
    expect(opQueues.every((q) => q.readOnlyMode === false)).toBe(true);
    expect(opQueues.flatMap((q) => q.jobs).some((j) => j.stacktrace.length > 0)).toBe(true);

    const workers = await stack.app.inject({
      method: 'GET',
      url: '/queues/api/queues/callbacks/workers',
      headers: bearer('operator'),
    });
    // showWorkers off: the list (Redis's CLIENT LIST: every connection's address) is not served to anyone.
    expect(workers.statusCode).toBe(403);
    expect(workers.body).not.toMatch(/addr|127\.0\.0\.1/);
  });

  it('adds board-guard.js to the board page, whatever the spelling', async () => {
    for (const url of ['/queues', '/%71ueues', '/queue%73/queue/callbacks']) {
      const res = await stack.app.inject({
        method: 'GET',
        url,
        headers: { cookie: cookies.viewer!, accept: 'text/html' },
      });
      expect(res.statusCode, url).toBe(200);
      expect(res.body, url).toContain('<script src="/assets/board-guard.js" data-role="viewer">');
    }
  });
});
