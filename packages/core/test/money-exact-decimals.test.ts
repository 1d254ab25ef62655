import { decimalEquals, decimalPlaces, isPositiveDecimal, normalizeDecimal } from '@mcb/core/money';
import { describe, expect, it } from 'vitest';

describe('money', () => {
  it('normalises without ever going through a float', () => {
    expect(normalizeDecimal('1000.50')).toBe('1000.5');
    expect(normalizeDecimal('0001.000')).toBe('1');
    expect(normalizeDecimal('-0.0')).toBe('0');
    expect(normalizeDecimal('1.5e3')).toBe('1500');
    expect(normalizeDecimal('15E-3')).toBe('0.015');
    expect(normalizeDecimal('12345678901234567890.123456789012345678')).toBe('12345678901234567890.123456789012345678');
  });

  it('compares exactly', () => {
    expect(decimalEquals('100', '100.00')).toBe(true);
    expect(decimalEquals('0.30000000000000004', '0.3')).toBe(false);
    expect(decimalEquals('9007199254740993', '9007199254740992')).toBe(false);
  });

  it('counts places and sign', () => {
    expect(decimalPlaces('1.50')).toBe(1);
    expect(decimalPlaces('100')).toBe(0);
    expect(isPositiveDecimal('0.00')).toBe(false);
    expect(isPositiveDecimal('-1')).toBe(false);
    expect(isPositiveDecimal('0.01')).toBe(true);
  });

  it('refuses what is not a number', () => {
    for (const bad of ['', 'abc', '1,5', '0x10', 'NaN', 'Infinity', '1e99999']) {
      expect(() => normalizeDecimal(bad), bad).toThrow(RangeError);
    }
  });
});
