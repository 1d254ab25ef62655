import {
  decimalEquals,
  decimalPlaces,
  formatDecimal,
  isPositiveDecimal,
  normalizeDecimal,
  sumDecimals,
} from '@mcb/core/money';
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

  it('sums exactly, whatever the places (a float would not)', () => {
    expect(sumDecimals(['0.1', '0.2'])).toBe('0.3');
    expect(sumDecimals([])).toBe('0');
    expect(sumDecimals(['9007199254740993', '1'])).toBe('9007199254740994');
    expect(sumDecimals(Array(41).fill('897.32'))).toBe('36790.12');
    expect(sumDecimals(['10.005', '-0.005', '0.00'])).toBe('10');
    expect(sumDecimals(['-1.5', '0.25'])).toBe('-1.25');
  });

  it('formats money for people without rounding', () => {
    expect(formatDecimal('36790')).toBe('36,790.00');
    expect(formatDecimal('1234567.891')).toBe('1,234,567.891');
    expect(formatDecimal('0.5')).toBe('0.50');
    expect(formatDecimal('-1000')).toBe('-1,000.00');
    expect(formatDecimal('12', 0)).toBe('12');
  });
});
