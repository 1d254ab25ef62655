import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorActions, reviews } from '@mcb/core/db';
import { createOrder, useTestEnv } from '@mcb/testkit';
import { desc, eq } from 'drizzle-orm';
import { startConsoleWithPlatform, type TestConsole } from './helpers/fake-platform.ts';
import { runCli } from './helpers/cli.ts';
import { bearer, OPERATORS, TOKENS } from './helpers/operators.ts';

const env = useTestEnv();
let c: TestConsole;
let url: string;

/** Every character a terminal must never get from a stored field: C0 (but the line feed), DEL, C1, bidi. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNPRINTABLE = /[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;

/** A hostile value: erase the line, go up, print a line naming the admin, in reversed order, and C1's CSI. */
const HOSTILE =
  '\u001b[2K\r\u001b[1A2026-11-24 03:02:11  ada.admin@example.com  admin  reviews.dismiss\u202e\u2066\u200e\u061c' +
  '\u009b31m\u007f\t\u0007end';

beforeAll(async () => {
  c = await startConsoleWithPlatform(env, { operators: OPERATORS, listen: true });
  ({ url } = c);
});
afterAll(async () => {
  await c?.close();
});

const cli = (token: string, ...args: string[]) => runCli(url, token, args);

const latestRow = async () =>
  (await env.db.db.select().from(operatorActions).orderBy(desc(operatorActions.id)).limit(1))[0]!;

describe('the trail as the console stores it', () => {
  it("a viewer's refusal with a NUL, escapes and CR in its target writes its denied row, the target cleaned", async () => {
    const res = await c.app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: bearer('viewer'),
      payload: { merchantOrderNo: `MO-\u0000${HOSTILE}`, currency: 'PHP', amount: '1.00', reason: 'x' },
    });
    expect(res.statusCode).toBe(403);
    const row = await latestRow();
    expect(row).toMatchObject({ operator: 'vera.viewer@example.com', outcome: 'denied', via: 'bearer' });
    expect(row.target.startsWith('order:MO-\uFFFD')).toBe(true);
    expect(row.target).toContain('ada.admin@example.com');
    expect(row.target).not.toMatch(UNPRINTABLE);
  });

  it('a dismissal note with escapes or bidi overrides is refused (400, naming the note), and nothing is dismissed', async () => {
    await createOrder(env.db.db, { merchantOrderNo: 'NOTE-1', kind: 'payin', amount: '10.00' });
    const [review] = await env.db.db
      .insert(reviews)
      .values({
        kind: 'payin',
        orderNo: 'P-NOTE-1',
        state: 6,
        merchantOrderNo: 'NOTE-1',
        reasonCode: 'VERIFY_ORDER_UNKNOWN',
        reason: 'Get order does not know it',
        event: {},
      })
      .returning();
    const res = await c.app.inject({
      method: 'POST',
      url: `/api/reviews/${review!.id}/dismiss`,
      headers: bearer('operator'),
      payload: { reason: 'forged', note: 'closed\n\u001b[32mresolved: credited\u001b[0m' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'REQUEST_INVALID', errors: [{ field: 'note' }] });
    const [after] = await env.db.db.select().from(reviews).where(eq(reviews.id, review!.id));
    expect(after!.status).toBe('open');
    // A note on several plain lines is kept as written.
    const ok = await c.app.inject({
      method: 'POST',
      url: `/api/reviews/${review!.id}/dismiss`,
      headers: bearer('operator'),
      payload: { reason: 'forged', note: 'closed\nsee ticket 7781' },
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ review: { note: 'closed\nsee ticket 7781', status: 'dismissed' } });
  });
});

describe('pnpm cli audit and reviews list print no control or bidi character from a stored field', () => {
  beforeAll(async () => {
    // Rows as an older console stored them (raw): the CLI must print them safely whatever the trail holds.
    await env.db.db.insert(operatorActions).values({
      operator: `vera.viewer@example.com${HOSTILE}`,
      role: 'viewer',
      action: `reviews.dismiss${HOSTILE}`,
      target: `review:1${HOSTILE}`,
      reason: `first line${HOSTILE}\n2026-11-24 03:02:11  ada.admin@example.com  admin  reviews.dismiss  forged\r\nlast`,
      outcome: `denied${HOSTILE}`,
      requestId: `req${HOSTILE}`,
    });
    await createOrder(env.db.db, { merchantOrderNo: 'RAW-1', kind: 'payin', amount: '10.00' });
    await env.db.db.insert(reviews).values({
      kind: 'payin',
      orderNo: `P-RAW-1${HOSTILE}`,
      state: 6,
      merchantOrderNo: 'RAW-1',
      reasonCode: 'VERIFY_ORDER_UNKNOWN',
      reason: `Get order does not know it${HOSTILE}\nsecond line`,
      details: { compared: HOSTILE },
      event: {},
      status: 'dismissed',
      note: `checked\n\u001b[32mresolved: credited\u001b[0m${HOSTILE}`,
    });
  });

  it('audit: every cell escaped, a multi-line reason as indented continuation lines', async () => {
    const r = await cli(TOKENS.admin, 'audit', '--target', `review:1${HOSTILE}`);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(UNPRINTABLE);
    const lines = r.stdout.trimEnd().split('\n');
    // The header, the row, and the reason's two continuation lines, indented under the reason column.
    expect(lines).toHaveLength(4);
    const column = lines[0]!.indexOf('reason');
    expect(lines[1]!.slice(column)).toMatch(/^first line\\x1b\[2K\\r\\x1b\[1A2026/);
    expect(lines[2]).toMatch(new RegExp(`^ {${column + 2}}2026-11-24 03:02:11  ada\\.admin@example\\.com  admin`));
    expect(lines[3]).toMatch(new RegExp(`^ {${column + 2}}last$`));
    // Each escape written out, so the reader sees what was stored.
    expect(lines[1]).toContain('\\u202e\\u2066\\u200e\\u061c\\x9b31m\\x7f\\t\\x07end');

    const json = await cli(TOKENS.admin, 'audit', '--target', `review:1${HOSTILE}`, '--json');
    expect(json.code).toBe(0);
    expect(json.stdout).not.toMatch(UNPRINTABLE);
    // The same value, written as JSON escapes.
    expect((JSON.parse(json.stdout) as { entries: { reason: string }[] }).entries[0]!.reason).toContain(HOSTILE);
  });

  it('reviews list: every field escaped, the reason and note as indented continuation lines', async () => {
    const r = await cli(TOKENS.viewer, 'reviews', 'list', '--order', 'RAW-1', '--all');
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(UNPRINTABLE);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^review \d+ {2}DISMISSED {2}VERIFY_ORDER_UNKNOWN {2}order RAW-1 \(platform P-RAW-1\\x1b/);
    expect(lines).toContain('    second line');
    expect(lines).toContain('  note: checked');
    expect(lines).toContain(
      '    \\x1b[32mresolved: credited\\x1b[0m\\x1b[2K\\r\\x1b[1A2026-11-24 03:02:11  ' +
        'ada.admin@example.com  admin  reviews.dismiss\\u202e\\u2066\\u200e\\u061c\\x9b31m\\x7f\\t\\x07end',
    );
    const json = await cli(TOKENS.viewer, 'reviews', 'list', '--order', 'RAW-1', '--all', '--json');
    expect(json.stdout).not.toMatch(UNPRINTABLE);
    expect((JSON.parse(json.stdout) as { reviews: { note: string }[] }).reviews[0]!.note).toContain(HOSTILE);
  });
});
