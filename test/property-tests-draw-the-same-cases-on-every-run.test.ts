import { describe, expect, it } from 'vitest';
import fc from 'fast-check';

// The vitest setup file pins fast-check's seed: a property test that passes once passes on every run with the same
// code (a flaky property test would cost a whole CI run). FC_SEED explores other draws on purpose.
describe('fast-check in this repository', () => {
  it('runs every property with a pinned seed', () => {
    const seed = fc.readConfigureGlobal().seed;
    expect(Number.isInteger(seed)).toBe(true);
    expect(seed).toBe(process.env.FC_SEED ? Number(process.env.FC_SEED) : 20_261_126);
  });

  it('so two runs of a property draw the same cases', () => {
    const draws = () => {
      const seen: string[] = [];
      fc.assert(
        fc.property(fc.uint8Array({ minLength: 1, maxLength: 8 }), (bytes) => {
          seen.push(Buffer.from(bytes).toString('hex'));
        }),
        { numRuns: 20 },
      );
      return seen;
    };
    const first = draws();
    expect(first).toHaveLength(20);
    expect(draws()).toEqual(first);
  });
});
