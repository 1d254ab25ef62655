import { describe, expect, it } from 'vitest';
import { samplePayout } from '../src/cli/merchant.ts';

// `pnpm sandbox trigger payout` registers a payout the catalog accepts: the first method whose required fields it
// can fill (sample values matching each pattern, the first bank for a bank name, or --param), or says why none can.
const field = (key: string, apiParam: string, pattern = '', required = true) => ({ key, apiParam, pattern, required });

describe('samplePayout', () => {
  it('fills every required field with a sample its pattern accepts, and a bank name with the first bank', () => {
    const chosen = samplePayout(
      [
        {
          paymentMethod: 101,
          name: 'IMPS',
          fields: [
            field('accountNo', 'accountNo', '^\\d{9,18}$'),
            field('ifsc', 'ifscCode', '^[A-Z]{4}0[A-Z0-9]{6}$'),
            field('bank', 'bankName'),
          ],
          banks: [{ name: 'State Bank of India', code: 'SBIN' }],
        },
      ],
      {},
    );
    expect(chosen).toEqual({
      paymentMethod: 101,
      name: 'IMPS',
      params: { accountNo: '123456789012', ifsc: 'SBIN0001234', bank: 'State Bank of India' },
    });
  });

  it('skips a method with a field the API cannot carry, and takes --param values as given', () => {
    const chosen = samplePayout(
      [
        { paymentMethod: 3, name: 'QR', fields: [field('idPhoto', '')] },
        { paymentMethod: 4, name: 'Wallet', fields: [field('mobile', 'accountNo', '^09\\d{9}$')] },
      ],
      { mobile: '09998887777' },
    );
    expect(chosen).toEqual({ paymentMethod: 4, name: 'Wallet', params: { mobile: '09998887777' } });
  });

  it('says why no method can be filled: a field not sendable by API, a pattern no sample matches, or no method at all', () => {
    const none = samplePayout(
      [
        { paymentMethod: 3, name: 'QR', fields: [field('idPhoto', '')] },
        { paymentMethod: 5, name: 'Odd', fields: [field('code', 'code', '^Z{12}$')] },
      ],
      {},
    );
    expect(none).toEqual({
      problem:
        'method 3: idPhoto cannot be sent through the API; method 5: no sample value matches code (^Z{12}$); pass --param code=...',
    });
    expect(samplePayout([], {})).toEqual({ problem: 'the catalog lists no payout method for this currency' });
  });
});
