import { describe, expect, it } from 'vitest';
import { reverifiedLine } from '../src/reviews/words.ts';

describe('the line an operator reads after a re-verify', () => {
  it('says a review of an already-applied pair stays open when it is still open (a forgery of that pair)', () => {
    const line = reverifiedLine('duplicate', 'open');
    expect(line).toMatch(/stays open/);
    expect(line).not.toMatch(/resolved/);
  });

  it('says resolved only when the review closed', () => {
    expect(reverifiedLine('duplicate', 'resolved')).toMatch(/nothing credited again, review resolved/);
    expect(reverifiedLine('applied', 'resolved')).toMatch(/credited \(or finalised\) once, review resolved/);
    expect(reverifiedLine('review', 'open')).toMatch(/stays open with the new reason/);
  });

  it('names an outcome it does not know instead of printing undefined', () => {
    expect(reverifiedLine(undefined, 'open')).toBe('no outcome (review open).');
  });
});
