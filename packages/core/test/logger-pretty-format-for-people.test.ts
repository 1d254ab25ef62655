import { describe, expect, it } from 'vitest';
import { loadConfig } from '@mcb/core/config';
import { createLogger, logFormatOf } from '@mcb/core/logger';
import { lineSink } from '@mcb/testkit';

// LOG_FORMAT=pretty (what `pnpm dev` sets) prints through pino-pretty for a person at a terminal; JSON stays the
// default. The redaction rules hold in both formats.

describe('LOG_FORMAT', () => {
  it('pretty: one line per entry (time, level, logger name, message, the rest as JSON), secrets still redacted', () => {
    const { lines, destination } = lineSink();
    const logger = createLogger({ name: 'ingest', format: 'pretty', destination });
    logger.info({ orderNo: 'P123', token: 'secret-token-value', record: { FiatCurrency: 1000 } }, 'callback stored');
    // A request log as fastify writes it: one line, not eight (the dev log once grew 8,400 lines in 7 minutes).
    logger.info(
      {
        reqId: 'req-1',
        req: { method: 'POST', url: '/callbacks/payin', host: '127.0.0.1:8080', remoteAddress: '127.0.0.1' },
      },
      'incoming request',
    );
    const out = lines.join('');
    expect(out).toMatch(/^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO \(ingest\): callback stored \{.*"orderNo":"P123".*\}\n/);
    expect(out.trimEnd().split('\n')).toHaveLength(2);
    expect(out).toMatch(/INFO \(ingest\): incoming request \{"reqId":"req-1","req":\{"method":"POST"/);
    expect(out).not.toContain('secret-token-value');
    expect(out).not.toContain('1000');
    expect(out).not.toMatch(/^\{/m);
    expect(out).not.toContain(String.fromCharCode(27)); // no colour codes into a stream that is not a terminal
  });

  it('json is the default, and the format is read before the rest of the config (which names a bad value)', () => {
    const { lines, destination } = lineSink();
    createLogger({ name: 'worker', destination }).info({ orderNo: 'P1' }, 'credited');
    expect(JSON.parse(lines[0]!)).toMatchObject({ app: 'worker', msg: 'credited', orderNo: 'P1' });
    expect([logFormatOf({}), logFormatOf({ LOG_FORMAT: 'pretty' }), logFormatOf({ LOG_FORMAT: 'loud' })]).toEqual([
      'json',
      'pretty',
      'json',
    ]);
    expect(() => loadConfig({ LOG_FORMAT: 'loud' }, 'cli')).toThrow(/LOG_FORMAT: /);
  });
});
