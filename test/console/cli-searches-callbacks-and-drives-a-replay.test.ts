import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, operatorActions, replays } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq } from 'drizzle-orm';
import { runCli } from '../../apps/console/test/helpers/cli.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: true, listen: true, consoleDeps: { operators: OPERATORS } });
});
afterAll(async () => {
  await stack?.close();
});

/** `pnpm cli ...` as a child process, with only the console's URL and an operator's token in its environment. */
const cli = (role: keyof typeof TOKENS, ...args: string[]) =>
  runCli(stack.url!, TOKENS[role], args, { timeoutMs: 30_000 });

async function failedPayin() {
  const no = uid();
  const o = { merchantOrderNo: `MO-CLI-${no}`, orderNo: `P-CLI-${no}` };
  await createOrder(env.db.db, { ...o, kind: 'payin', amount: '64.00' });
  stack.platform.failNext(o.merchantOrderNo, 1, 500);
  const jobId = await stack.add(payinEvent({ ...o, fiatAmount: '64.00' }), 1);
  await waitFor(
    async () =>
      (
        await env.db.db
          .select()
          .from(callbackArrivals)
          .where(and(eq(callbackArrivals.jobId, jobId), eq(callbackArrivals.status, 'failed')))
      )[0],
  );
  stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: '64.00' }));
  return { ...o, jobId };
}

// Each step runs `pnpm cli` as a child process (a Node start of its own, a few seconds on a loaded 2-core machine), ten
// of them in the first test: the test's time is the processes' start-ups, not what it asserts.
describe('pnpm cli callbacks / replay', { timeout: 120_000 }, () => {
  it('finds a failed callback by merchant order number, dry-runs, replays it to the end and reports; the audit names the operator', async () => {
    const o = await failedPayin();
    const found = await cli('viewer', 'callbacks', 'search', '--merchant-order-no', o.merchantOrderNo, '--timeline');
    expect(found.code, found.stderr).toBe(0);
    expect(found.stdout).toMatch(
      new RegExp(`failed\\s+payin\\s+${o.merchantOrderNo}\\s+${o.orderNo}\\s+6\\s+64.00\\s+1\\s+PLATFORM_HTTP_ERROR`),
    );
    expect(found.stdout).toContain('job-failed');
    expect((await cli('viewer', 'callbacks', 'search', '--merchant-order-no', 'MO-none')).code).toBe(3);

    const plan = await cli('operator', 'replay', 'plan', '--merchant-order-no', o.merchantOrderNo);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toMatch(/1 failed job\(s\) match/);
    expect(plan.stdout).toMatch(/will apply \(credit or finalise\)\s+1/);

    const denied = await cli(
      'viewer',
      'replay',
      'start',
      '--merchant-order-no',
      o.merchantOrderNo,
      '--reason',
      'customer paid',
    );
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/403 FORBIDDEN replays.start needs the role operator/);
    expect((await cli('operator', 'replay', 'start', '--merchant-order-no', o.merchantOrderNo)).code).toBe(2);

    const started = await cli(
      'operator',
      'replay',
      'start',
      '--merchant-order-no',
      o.merchantOrderNo,
      '--reason',
      'customer paid, Get order was down',
      '--rate',
      '5',
      '--wait',
    );
    expect(started.code, started.stderr).toBe(0);
    const id = /started replay (\d+) running/.exec(started.stdout)?.[1];
    expect(id).toBeDefined();
    expect(started.stderr).toMatch(
      new RegExp(
        `replay ${id} finished: 1 of 1 sent back, 0 skipped, 0 to go at 5/s \\(by otto.operator@example.com\\)`,
      ),
    );
    const status = await cli('viewer', 'replay', 'status', id!, '--json');
    expect(JSON.parse(status.stdout)).toMatchObject({ id: Number(id), status: 'finished', replayed: 1 });
    const late = await cli('operator', 'replay', 'cancel', id!, '--reason', 'too late');
    expect(late.code).toBe(1);
    expect(late.stderr).toMatch(/409 REPLAY_NOT_RUNNING/);

    await waitFor(
      async () =>
        (await cli('viewer', 'callbacks', 'search', '--merchant-order-no', o.merchantOrderNo)).stdout.includes(
          'credited',
        ),
      { timeoutMs: 15_000 },
    );
    const audit = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.target, `callbacks:merchantOrderNo=${o.merchantOrderNo}`));
    expect(audit.map((a) => [a.operator, a.action, a.outcome, a.reason])).toEqual(
      expect.arrayContaining([
        ['vera.viewer@example.com', 'replays.start', 'denied', 'customer paid'],
        ['otto.operator@example.com', 'replays.start', 'started', 'customer paid, Get order was down'],
      ]),
    );
  });

  it('says who cancelled a replay and why, in status and list', async () => {
    const [row] = await env.db.db
      .insert(replays)
      .values({
        operator: 'otto.operator@example.com',
        reason: 'after the outage',
        filter: { code: 'PLATFORM_HTTP_ERROR' },
        ratePerSecond: 5,
        total: 3,
        status: 'cancelled',
        endedBy: 'ada.admin@example.com',
        endReason: 'wrong window',
        finishedAt: new Date(),
      })
      .returning();
    const status = await cli('viewer', 'replay', 'status', String(row!.id));
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('cancelled by ada.admin@example.com: wrong window');
    const json = await cli('viewer', 'replay', 'status', String(row!.id), '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({ endedBy: 'ada.admin@example.com', endReason: 'wrong window' });
    const list = await cli('viewer', 'replay', 'list');
    expect(list.stdout).toMatch(
      new RegExp(`^${row!.id} +cancelled .*cancelled by ada\\.admin@example\\.com: wrong window`, 'm'),
    );
  });

  it('says what is wrong with bad input, in one line, and changes nothing', async () => {
    expect((await cli('operator', 'callbacks', 'search')).code).toBe(2);
    const bad = await cli('operator', 'callbacks', 'search', '--status', 'lost');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^400 REQUEST_INVALID .*status/);
    expect((await cli('operator', 'replay', 'status', 'abc')).code).toBe(2);
    expect(
      (await cli('operator', 'replay', 'start', '--status', 'failed', '--reason', 'x', '--rate', 'fast')).code,
    ).toBe(2);
    const tooFast = await cli('operator', 'replay', 'start', '--status', 'failed', '--reason', 'x', '--rate', '5000');
    expect(tooFast.stderr).toMatch(/400 REQUEST_INVALID ratePerSecond 5000 is above CONSOLE_REPLAY_MAX_RATE/);
  });
});
