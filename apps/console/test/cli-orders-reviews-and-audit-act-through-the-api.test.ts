import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reviews } from '@mcb/core/db';
import { createOrder, useTestEnv } from '@mcb/testkit';
import { startConsoleWithPlatform, type TestConsole } from './helpers/fake-platform.ts';
import { runCli } from './helpers/cli.ts';
import { OPERATORS, SERVICE, TOKENS } from './helpers/operators.ts';

const env = useTestEnv();
let c: TestConsole;
let url: string;
let reviewId: number;

beforeAll(async () => {
  c = await startConsoleWithPlatform(env, { operators: [...OPERATORS, SERVICE], listen: true });
  ({ url } = c);
  await createOrder(env.db.db, { merchantOrderNo: 'CLI-1', kind: 'payin', amount: '420.00' });
  const [row] = await env.db.db
    .insert(reviews)
    .values({
      kind: 'payin',
      orderNo: 'P-CLI-1',
      state: 6,
      merchantOrderNo: 'CLI-1',
      reasonCode: 'VERIFY_ORDER_UNKNOWN',
      reason: 'Get order does not know it',
      event: {},
    })
    .returning();
  reviewId = row!.id;
});
afterAll(async () => {
  await c?.close();
});

/** `pnpm cli ...` as a child process: the console's address and the operator's token from the environment only. */
const cli = (token: string | undefined, ...args: string[]) => runCli(url, token, args);

describe('pnpm cli orders / reviews / audit', () => {
  it('orders get prints the order, its amount, ledger and timeline; an unknown one exits 1', async () => {
    const r = await cli(TOKENS.viewer, 'orders', 'get', 'CLI-1');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^order CLI-1 {2}payin {2}PENDING {2}420 PHP {2}platform \(not known yet\)/);
    expect(r.stdout).toContain('open review since');
    expect(r.stdout).toMatch(/review-opened\s+P-CLI-1\/6/);
    const missing = await cli(TOKENS.viewer, 'orders', 'get', 'NOPE');
    expect([missing.code, missing.stderr.trim()]).toEqual([1, '404 NOT_FOUND no order NOPE']);
  });

  it('reviews list, then dismiss: refused without a reason and for a viewer, done for an operator', async () => {
    const list = await cli(TOKENS.viewer, 'reviews', 'list', '--status', 'open');
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(
      `review ${reviewId}  OPEN  VERIFY_ORDER_UNKNOWN  order CLI-1 (platform P-CLI-1, payin state 6)`,
    );

    const noReason = await cli(TOKENS.operator, 'reviews', 'dismiss', String(reviewId));
    expect(noReason.code).toBe(1);
    expect(noReason.stderr).toMatch(/^400 REASON_REQUIRED a reason is required.*\[reason: required\]/);
    const viewer = await cli(TOKENS.viewer, 'reviews', 'dismiss', String(reviewId), '--reason', 'looks forged');
    expect(viewer.code).toBe(1);
    expect(viewer.stderr).toMatch(
      /^403 FORBIDDEN reviews\.dismiss needs the role operator; vera\.viewer@example\.com is viewer \(needs the role operator\)/,
    );

    const done = await cli(
      TOKENS.operator,
      'reviews',
      'dismiss',
      String(reviewId),
      '--reason',
      'platform says it never existed',
    );
    expect(done.code).toBe(0);
    expect(done.stdout).toContain('dismissed: nothing credited');
    expect(done.stdout).toContain('note: platform says it never existed');
  });

  it("audit shows the operator their own actions, and an admin everyone's, filtered", async () => {
    const mine = await cli(TOKENS.operator, 'audit');
    expect(mine.code).toBe(0);
    expect(mine.stdout).toMatch(
      /otto\.operator@example\.com\s+operator\s+bearer\s+reviews\.dismiss\s+review:\d+\s+dismissed\s+platform says it never existed/,
    );
    expect(mine.stdout).not.toContain('vera.viewer');
    const admin = await cli(TOKENS.admin, 'audit', '--operator', 'vera.viewer@example.com', '--json');
    expect(admin.code).toBe(0);
    expect(JSON.parse(admin.stdout)).toMatchObject({
      scope: 'all',
      entries: [{ operator: 'vera.viewer@example.com', outcome: 'denied', reason: 'looks forged' }],
    });
  });

  it("audit leaves the shop's registrations (a service client) out unless --services show or only", async () => {
    const shop = await fetch(`${url}/api/payins`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.service}`, 'content-type': 'application/json' },
      body: JSON.stringify({ merchantOrderNo: 'CLI-SHOP-1', currency: 'PHP', amount: '5.00' }),
    });
    expect(shop.status).toBe(201);
    const people = await cli(TOKENS.admin, 'audit');
    expect(people.code).toBe(0);
    expect(people.stdout).not.toContain('shop-orders');
    const shown = await cli(TOKENS.admin, 'audit', '--services', 'show');
    expect(shown.stdout).toMatch(
      /shop-orders\s+service\s+bearer\s+orders\.register\s+order:CLI-SHOP-1\s+created\s+\(none\)/,
    );
    expect(shown.stdout).toContain('otto.operator@example.com');
    const only = await cli(TOKENS.admin, 'audit', '--services', 'only', '--json');
    expect((JSON.parse(only.stdout) as { entries: { role: string }[] }).entries.map((e) => e.role)).toEqual([
      'service',
    ]);
    expect((await cli(TOKENS.admin, 'audit', '--services', 'sometimes')).code).toBe(1);
  });

  it('says which variable to set when no token is set, and prints usage for a wrong command (exit 2)', async () => {
    const r = await cli(undefined, 'audit');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('set CONSOLE_OPERATOR_TOKEN');
    expect((await cli(TOKENS.viewer, 'reviews', 'frobnicate')).code).toBe(2);
  });
});
