import { createLogger } from '@mcb/core/logger';
import { lineSink, useTestEnv } from '@mcb/testkit';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';

// Finding: logged database errors carried drizzle's `params` (amounts, pay times) in their fields and message.
const env = useTestEnv();

function capture() {
  const { lines, destination } = lineSink();
  return { log: createLogger({ name: 'test', destination }), lines };
}

describe('a logged database error', () => {
  it('keeps the SQL, the SQLSTATE and the message, never the query parameters', async () => {
    const { log, lines } = capture();
    const err = await env.db.db.execute(sql`select ${'AMOUNT-1234.56'}::int`).catch((e: unknown) => e);
    log.error({ err }, 'query failed');
    const out = lines.join('');
    expect(out).not.toContain('AMOUNT-1234.56');
    expect(out).toContain('22P02'); // invalid_text_representation, from pg's cause
    expect(out).toContain('select $1::int');
    expect(out).toContain('[redacted]');
  });

  it('never writes the row a constraint violation quotes', async () => {
    const { log, lines } = capture();
    const err = await env.db.db
      .execute(
        sql`insert into orders (merchant_order_no, kind, currency, amount, request_hash) values ('M-LOG', 'payin', 'PHP', ${'-987.65'}, 'h')`,
      )
      .catch((e: unknown) => e);
    log.error({ err }, 'insert failed');
    const out = lines.join('');
    expect(out).toContain('23514');
    expect(out).not.toContain('987.65');
  });
});
