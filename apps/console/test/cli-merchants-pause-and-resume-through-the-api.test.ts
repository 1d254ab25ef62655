import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantPauses, operatorActions } from '@mcb/core/db';
import { useTestEnv } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { startConsoleWithPlatform, type TestConsole } from './helpers/fake-platform.ts';
import { runCli } from './helpers/cli.ts';
import { OPERATORS, TOKENS } from './helpers/operators.ts';

const env = useTestEnv();
let c: TestConsole;
let url: string;

beforeAll(async () => {
  c = await startConsoleWithPlatform(env, { operators: OPERATORS, listen: true });
  ({ url } = c);
});
afterAll(async () => {
  await c?.close();
});

/** `pnpm cli ...` as a child process: the console's address and the operator's token from the environment only. */
const cli = (token: string, ...args: string[]) => runCli(url, token, args);

describe('pnpm cli merchants pause / resume', () => {
  it('refuses without a reason, for a viewer and for an unknown ref; pauses, refuses a second pause, resumes', async () => {
    const noReason = await cli(TOKENS.operator, 'merchants', 'pause', 'default');
    expect([noReason.code, noReason.stderr]).toEqual([1, expect.stringMatching(/^400 REASON_REQUIRED/)]);
    const viewer = await cli(TOKENS.viewer, 'merchants', 'pause', 'default', '--reason', 'looking');
    expect([viewer.code, viewer.stderr]).toEqual([
      1,
      expect.stringMatching(/^403 FORBIDDEN merchants\.pause needs the role operator/),
    ]);
    const unknown = await cli(TOKENS.operator, 'merchants', 'pause', 'nosuch', '--reason', 'typo');
    expect([unknown.code, unknown.stderr]).toEqual([1, expect.stringMatching(/^404 NOT_FOUND no merchant "nosuch"/)]);
    expect(await env.db.db.select().from(merchantPauses)).toEqual([]);

    const paused = await cli(TOKENS.operator, 'merchants', 'pause', 'default', '--reason', 'platform incident #77');
    expect(paused.code).toBe(0);
    expect(paused.stdout).toMatch(
      /^paused: merchant default \(\S+\) PAUSED by otto\.operator@example\.com since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n {2}why: platform incident #77\n$/,
    );
    const again = await cli(TOKENS.operator, 'merchants', 'pause', 'default', '--reason', 'again');
    expect([again.code, again.stderr]).toEqual([
      1,
      expect.stringMatching(/^409 MERCHANT_ALREADY_PAUSED merchant "default" is already paused by otto/),
    ]);
    const [row] = await env.db.db.select().from(merchantPauses);
    expect(row).toMatchObject({ pausedBy: 'otto.operator@example.com', reason: 'platform incident #77' });

    const resumed = await cli(TOKENS.operator, 'merchants', 'resume', 'default', '--reason', 'incident over', '--json');
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ merchant: 'default', paused: false, since: null });
    const twice = await cli(TOKENS.operator, 'merchants', 'resume', 'default', '--reason', 'again');
    expect([twice.code, twice.stderr]).toEqual([1, expect.stringMatching(/^409 MERCHANT_NOT_PAUSED/)]);
    const audit = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.target, 'merchant:default'))
      .orderBy(operatorActions.id);
    expect(audit.map((a) => [a.action, a.outcome])).toEqual([
      ['merchants.pause', 'denied'],
      ['merchants.pause', 'paused'],
      ['merchants.pause', 'failed:MERCHANT_ALREADY_PAUSED'],
      ['merchants.resume', 'resumed'],
      ['merchants.resume', 'failed:MERCHANT_NOT_PAUSED'],
    ]);
    expect(audit.every((a) => a.merchantNo === row!.merchantNo)).toBe(true);
  });

  it('prints its usage for a missing ref (exit 2)', async () => {
    const r = await cli(TOKENS.operator, 'merchants', 'pause');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('usage: pnpm cli merchants pause <ref> --reason');
  });
});
