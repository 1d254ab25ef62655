import { describe, expect, it } from 'vitest';
import type { CallbackJobInput } from '@mcb/core/queue';
import type { ReadBack } from '../src/add-and-read-back.ts';
import { sortReadBacks, variantJobId, type BatchAdd } from '../src/store-batch.ts';

// The store step of a batch decides, from what each id holds right after its add, whether this callback is stored,
// is the same callback again (a copy, noted on its job), or is a different record under a taken id (a variant,
// added again under an id of its own before it counts as stored).
const job: CallbackJobInput = {
  kind: 'payin',
  orderNo: 'P1',
  merchantNo: 'M1',
  merchantOrderNo: 'MO1',
  state: 6,
  payTime: '2026-11-26T08:00:00.000Z',
  quantity: '10.5',
  fiatAmount: '75.00',
  receivedAt: '2026-11-26T08:00:01.000Z',
  source: 'callback',
};
const add = (j: CallbackJobInput): BatchAdd => ({ job: j, jobId: 'payin-P1-6', context: undefined, check: 'none' });
const held = (j: CallbackJobInput): ReadBack => ({ ok: true, data: JSON.stringify(j) });

describe('sorting a batch by what its read-backs found', () => {
  it('its own record is stored, neither a copy nor a variant', () => {
    expect(sortReadBacks([add(job)], [held(job)])).toEqual({ outcome: [{ ok: true }], variants: [], copies: [] });
  });

  it('the same record received earlier is stored and a copy', () => {
    const earlier = { ...job, receivedAt: '2026-11-26T07:59:00.000Z' };
    expect(sortReadBacks([add(job)], [held(earlier)])).toEqual({ outcome: [{ ok: true }], variants: [], copies: [0] });
  });

  it('another record under the id (or data that is not a job) makes a variant', () => {
    const forged = { ...job, fiatAmount: '7500.00' };
    const sorted = sortReadBacks([add(job), add(job)], [held(forged), { ok: true, data: 'not json' }]);
    expect(sorted.variants).toEqual([0, 1]);
    expect(sorted.copies).toEqual([]);
  });

  it('a failed read-back fails that add alone, with its error', () => {
    const error = new Error('no reply to the read-back');
    const sorted = sortReadBacks([add(job), add(job)], [{ ok: false, error }, held(job)]);
    expect(sorted.outcome).toEqual([{ ok: false, error }, { ok: true }]);
    expect(sorted.variants).toEqual([]);
  });

  it("a variant's id is the contract id plus a digest of the record, the same for the same record", () => {
    const forged = { ...job, fiatAmount: '7500.00' };
    expect(variantJobId('payin-P1-6', job)).toMatch(/^payin-P1-6-[0-9a-f]{16}$/);
    expect(variantJobId('payin-P1-6', { ...job, receivedAt: 'later' })).toBe(variantJobId('payin-P1-6', job));
    expect(variantJobId('payin-P1-6', forged)).not.toBe(variantJobId('payin-P1-6', job));
  });
});
