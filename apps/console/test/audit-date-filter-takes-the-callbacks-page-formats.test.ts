import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorActions } from '@mcb/core/db';
import { useTestEnv } from '@mcb/testkit';
import { AUTH, startConsole, startFakePlatform, type TestConsole } from './helpers/fake-platform.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let c: TestConsole;

beforeAll(async () => {
  platform = await startFakePlatform();
  c = await startConsole({ db: env.db, databaseUrl: env.databaseUrl, baseUrl: platform.baseUrl });
  const row = {
    operator: 'admin',
    role: 'admin' as const,
    action: 'reviews.dismiss',
    reason: 'r',
    outcome: 'dismissed',
  };
  await env.db.db.insert(operatorActions).values([
    { ...row, target: 'review:1', at: new Date('2026-11-24T07:59:59Z') },
    { ...row, target: 'review:2', at: new Date('2026-11-24T08:00:00Z') },
    { ...row, target: 'review:3', at: new Date('2026-11-24T08:30:15Z') },
  ]);
});
afterAll(async () => {
  await c?.close();
  await platform?.stop();
});

const targets = async (query: string) => {
  const res = await c.app.inject({ method: 'GET', url: `/api/audit?${query}`, headers: AUTH });
  expect(res.statusCode).toBe(200);
  return (res.json() as { entries: { target: string }[] }).entries.map((e) => e.target).sort();
};

describe("the audit's date filter takes what the Callbacks page takes", () => {
  it('a UTC time without a zone, with a space or a T, with or without seconds, and an ISO instant', async () => {
    const q = (from: string, to: string) => new URLSearchParams({ from, to }).toString();
    expect(await targets(q('2026-11-24 08:00', '2026-11-24 08:30'))).toEqual(['review:2']);
    expect(await targets(q('2026-11-24T08:00', '2026-11-24T08:30:16'))).toEqual(['review:2', 'review:3']);
    expect(await targets(q('2026-11-24T08:00:00Z', '2026-11-24T08:30:00+00:00'))).toEqual(['review:2']);
  });

  it('the page takes them too, and keeps refusing what is not a time (400)', async () => {
    const page = await c.app.inject({
      method: 'GET',
      url: `/audit?${new URLSearchParams({ from: '2026-11-24 08:00' })}`,
      headers: { ...AUTH, accept: 'text/html' },
    });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('review:3');
    expect(page.body).not.toContain('review:1');
    const bad = await c.app.inject({ method: 'GET', url: '/api/audit?from=yesterday', headers: AUTH });
    expect(bad.statusCode).toBe(400);
  });
});
