import { describe, expect, it } from 'vitest';
import { catalogSchema, compilePattern, validatePayout, type Catalog } from '@mcb/core/catalog';

/** A catalog with every kind of method, field and bank list the spec describes. */
const catalog: Catalog = catalogSchema.parse({
  currencies: [
    {
      currency: 'PHP',
      symbol: '₱',
      decimals: 2,
      methods: [
        {
          paymentMethod: 1,
          name: 'Bank transfer',
          kind: 'bank',
          fields: [
            {
              key: 'accountName',
              apiParam: 'accountName',
              label: 'Account name',
              required: true,
              pattern: '',
              hint: '',
            },
            {
              key: 'accountNo',
              apiParam: 'bankAccount',
              label: 'Account number',
              required: true,
              pattern: '^[0-9]{10,16}$',
              hint: '10 to 16 digits',
            },
            {
              key: 'bank',
              apiParam: 'bankName',
              label: 'Bank',
              required: true,
              pattern: '',
              hint: 'pick from the list',
            },
            { key: 'branch', apiParam: 'bankBranch', label: 'Branch', required: false, pattern: '^[A-Z ]+$', hint: '' },
            {
              key: 'note',
              apiParam: '',
              label: 'Note to operator',
              required: false,
              pattern: '',
              hint: 'console only',
            },
          ],
          banks: [
            { name: 'BDO Unibank', code: 'BDO' },
            { name: 'Metrobank', code: 'MBT' },
          ],
        },
        {
          paymentMethod: 2,
          name: 'GCash',
          kind: 'wallet',
          fields: [
            {
              key: 'mobile',
              apiParam: 'accountNo',
              label: 'Mobile',
              required: true,
              pattern: '^09[0-9]{9}$',
              hint: '09XXXXXXXXX',
            },
          ],
        },
        {
          paymentMethod: 3,
          name: 'QR Ph',
          kind: 'qrcode',
          fields: [
            { key: 'qr', apiParam: 'qrContent', label: 'QR content', required: true, pattern: '', hint: '' },
            {
              key: 'idPhoto',
              apiParam: '',
              label: 'ID photo',
              required: true,
              pattern: '',
              hint: 'upload in the console',
            },
          ],
        },
        {
          paymentMethod: 4,
          name: 'Bank list only',
          kind: 'bank',
          fields: [
            { key: 'accountNo', apiParam: 'bankAccount', label: 'Account', required: true, pattern: '', hint: '' },
          ],
          banks: [{ name: 'Landbank', code: 'LBP' }],
        },
        {
          paymentMethod: 5,
          name: 'Broken patterns',
          kind: 'wallet',
          fields: [
            { key: 'a', apiParam: 'a', label: 'Look-ahead', required: true, pattern: '^(?=x)x$', hint: '' },
            { key: 'b', apiParam: 'b', label: 'Unclosed', required: true, pattern: '[0-9', hint: '' },
          ],
        },
      ],
    },
    { currency: 'JPY', symbol: '¥', decimals: 0, methods: [] },
  ],
});

const validBank = { accountName: 'Juan Cruz', accountNo: '1234567890', bank: 'BDO Unibank' };

function problems(input: Parameters<typeof validatePayout>[1]) {
  const r = validatePayout(catalog, input);
  if (r.ok) throw new Error(`expected problems, got ${JSON.stringify(r.apiParams)}`);
  return r.errors;
}

describe('validatePayout', () => {
  it('returns the create-payout parameters keyed by apiParam for a valid payout', () => {
    const r = validatePayout(catalog, {
      currency: 'PHP',
      amount: '1500.50',
      paymentMethod: 1,
      params: { ...validBank, branch: 'MAKATI AVE' },
    });
    expect(r).toEqual({
      ok: true,
      apiParams: {
        accountName: 'Juan Cruz',
        bankAccount: '1234567890',
        bankName: 'BDO Unibank',
        bankBranch: 'MAKATI AVE',
      },
    });
  });

  it('reports a currency that is not enabled, naming the field and the enabled ones', () => {
    const errors = problems({ currency: 'USD', amount: '10', paymentMethod: 1, params: {} });
    expect(errors).toEqual([{ field: 'currency', message: expect.stringContaining('USD is not enabled') }]);
    expect(errors[0]!.message).toContain('PHP, JPY');
  });

  it('reports a method that is not offered for the currency', () => {
    const errors = problems({ currency: 'PHP', amount: '10', paymentMethod: 99, params: {} });
    expect(errors).toEqual([
      { field: 'paymentMethod', message: expect.stringContaining('method 99 is not offered for PHP') },
    ]);
    expect(problems({ currency: 'JPY', amount: '10', paymentMethod: 1, params: {} })[0]).toMatchObject({
      field: 'paymentMethod',
      message: expect.stringContaining('offered: none'),
    });
  });

  it('reports every missing required field at once, with its hint', () => {
    const errors = problems({ currency: 'PHP', amount: '10', paymentMethod: 1, params: { accountName: '  ' } });
    expect(errors.map((e) => e.field)).toEqual(['params.accountName', 'params.accountNo', 'params.bank']);
    expect(errors[1]!.message).toBe('Account number (accountNo) is required; hint: 10 to 16 digits');
  });

  it('reports a value that does not match the field pattern, optional fields included', () => {
    const errors = problems({
      currency: 'PHP',
      amount: '10',
      paymentMethod: 1,
      params: { ...validBank, accountNo: '12345', branch: 'makati' },
    });
    expect(errors).toEqual([
      {
        field: 'params.accountNo',
        message: expect.stringContaining('does not match the required pattern ^[0-9]{10,16}$'),
      },
      { field: 'params.branch', message: expect.stringContaining('Branch (branch) does not match') },
    ]);
  });

  it('reports a bankName that is not among banks[], and a bank code sent instead of a name', () => {
    expect(
      problems({ currency: 'PHP', amount: '10', paymentMethod: 1, params: { ...validBank, bank: 'Chase' } }),
    ).toEqual([
      { field: 'params.bank', message: expect.stringContaining('Chase is not among the 2 banks of method 1') },
    ]);
    expect(
      problems({ currency: 'PHP', amount: '10', paymentMethod: 1, params: { ...validBank, bank: 'MBT' } }),
    ).toEqual([{ field: 'params.bank', message: expect.stringContaining("send the bank's name (Metrobank)") }]);
  });

  it('requires bankName from banks[] when the method lists banks but has no field for it', () => {
    expect(problems({ currency: 'PHP', amount: '10', paymentMethod: 4, params: { accountNo: '1' } })).toEqual([
      { field: 'params.bankName', message: expect.stringContaining('bankName is required') },
    ]);
    expect(
      problems({ currency: 'PHP', amount: '10', paymentMethod: 4, params: { accountNo: '1', bankName: 'BDO' } }),
    ).toEqual([{ field: 'params.bankName', message: expect.stringContaining('not among the 1 banks') }]);
    expect(
      validatePayout(catalog, {
        currency: 'PHP',
        amount: '10',
        paymentMethod: 4,
        params: { accountNo: '1', bankName: 'Landbank' },
      }),
    ).toEqual({
      ok: true,
      apiParams: { bankAccount: '1', bankName: 'Landbank' },
    });
  });

  it('says that a required field with an empty apiParam cannot be sent through the API', () => {
    const errors = problems({
      currency: 'PHP',
      amount: '10',
      paymentMethod: 3,
      params: { qr: '000201', idPhoto: 'x' },
    });
    expect(errors).toEqual([
      { field: 'params.idPhoto', message: expect.stringContaining('cannot be sent through the API') },
    ]);
  });

  it('refuses a value for an optional field that has no apiParam instead of dropping it silently', () => {
    const errors = problems({
      currency: 'PHP',
      amount: '10',
      paymentMethod: 1,
      params: { ...validBank, note: 'urgent' },
    });
    expect(errors).toEqual([{ field: 'params.note', message: expect.stringContaining('leave it out') }]);
  });

  it('reports more decimals than the currency allows, and amounts that are not positive decimals', () => {
    expect(problems({ currency: 'PHP', amount: '10.005', paymentMethod: 1, params: validBank })).toEqual([
      { field: 'amount', message: 'PHP allows at most 2 decimal places; got 3' },
    ]);
    expect(problems({ currency: 'JPY', amount: '10.5', paymentMethod: 1, params: {} })[0]).toEqual({
      field: 'amount',
      message: 'JPY allows at most 0 decimal places; got 1',
    });
    // Trailing zeros are not extra precision.
    expect(validatePayout(catalog, { currency: 'PHP', amount: '10.500', paymentMethod: 1, params: validBank }).ok).toBe(
      true,
    );
    expect(problems({ currency: 'PHP', amount: '0', paymentMethod: 1, params: validBank })[0]!.field).toBe('amount');
    expect(problems({ currency: 'PHP', amount: '1e3', paymentMethod: 1, params: validBank })[0]!.field).toBe('amount');
    expect(problems({ currency: 'PHP', amount: '-5', paymentMethod: 1, params: validBank })[0]!.field).toBe('amount');
  });

  it('reports a parameter that is not a field of the method, suggesting the key when an apiParam was used', () => {
    const errors = problems({ currency: 'PHP', amount: '10', paymentMethod: 2, params: { accountNo: '09171234567' } });
    expect(errors.map((e) => e.field)).toEqual(['params.mobile', 'params.accountNo']);
    expect(errors[1]!.message).toContain('send it under that key');
  });

  it('reports an unusable pattern as a problem of its field instead of throwing', () => {
    const errors = problems({ currency: 'PHP', amount: '10', paymentMethod: 5, params: { a: 'x', b: '1' } });
    expect(errors).toEqual([
      { field: 'params.a', message: expect.stringContaining('pattern for Look-ahead (a) is unusable') },
      { field: 'params.b', message: expect.stringContaining('is unusable (missing closing ]') },
    ]);
  });

  it('returns every problem of one payout together', () => {
    const errors = problems({
      currency: 'PHP',
      amount: '1.234',
      paymentMethod: 1,
      params: { accountNo: 'abc', bank: 'Nope', extra: '1' },
    });
    expect(errors.map((e) => e.field)).toEqual([
      'amount',
      'params.accountName',
      'params.accountNo',
      'params.bank',
      'params.extra',
    ]);
  });

  it('decides the catastrophic-backtracking pattern (a+)+$ on thirty a and a ! within 50 ms', () => {
    const evil: Catalog = {
      currencies: [
        {
          currency: 'PHP',
          symbol: '₱',
          decimals: 2,
          methods: [
            {
              paymentMethod: 9,
              name: 'Evil',
              kind: 'wallet',
              fields: [{ key: 'v', apiParam: 'v', label: 'V', required: true, pattern: '(a+)+$', hint: '' }],
              banks: undefined,
            },
          ],
        },
      ],
    };
    // CPU time of this process, not wall time: on a loaded machine a descheduled process would pass 50 ms of wall time
    // by chance, while catastrophic backtracking on 30 characters costs seconds of CPU.
    const started = process.cpuUsage();
    const r = validatePayout(evil, {
      currency: 'PHP',
      amount: '1',
      paymentMethod: 9,
      params: { v: `${'a'.repeat(30)}!` },
    });
    const { user, system } = process.cpuUsage(started);
    expect(r.ok).toBe(false);
    expect((user + system) / 1000).toBeLessThan(50);
    // And it still matches what it should.
    expect(validatePayout(evil, { currency: 'PHP', amount: '1', paymentMethod: 9, params: { v: 'aaaa' } }).ok).toBe(
      true,
    );
  });

  it('compiles patterns once and never throws for garbage', () => {
    const a = compilePattern('^[0-9]+$');
    expect(compilePattern('^[0-9]+$')).toBe(a);
    expect(compilePattern('(a)\\1')).toMatchObject({ ok: false, reason: expect.stringContaining('invalid escape') });
    expect(compilePattern('x'.repeat(5000))).toMatchObject({
      ok: false,
      reason: expect.stringContaining('longer than'),
    });
  });
});
