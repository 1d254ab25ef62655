import { Writable } from 'node:stream';
import { createLogger } from '@mcb/core/logger';
import { describe, expect, it } from 'vitest';

describe('createLogger', () => {
  it('never writes bodies, decrypted records, keys or tokens', () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const log = createLogger({ name: 'test', destination });
    log.info(
      {
        orderNo: 'P1',
        body: { encryptedData: 'SECRET-BODY' },
        req: { body: 'SECRET-REQ', headers: { authorization: 'Bearer SECRET-TOKEN' } },
        record: { MerchantOrderNo: 'SECRET-RECORD' },
        privateKey: '-----BEGIN PRIVATE KEY-----SECRET',
      },
      'callback accepted',
    );
    const out = lines.join('');
    expect(out).toContain('"orderNo":"P1"');
    expect(out).toContain('callback accepted');
    expect(out).not.toMatch(/SECRET/);
  });
});
