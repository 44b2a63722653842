import { describe, expect, it } from 'vitest';
import { costMicros, isExactPrice, microsToUsd, picosPerToken, usdToMicros } from '../../src/kernel/money.ts';

describe('costMicros', () => {
  it('is exact to the micro-dollar, rounding once half up', () => {
    const p = { inputPicos: picosPerToken(0.15), outputPicos: picosPerToken(0.6) };
    expect(costMicros(1234, 567, p)).toBe(525n); // 525.3
    expect(costMicros(1, 0, { inputPicos: picosPerToken(0.5), outputPicos: 0n })).toBe(1n); // 0.5 → 1
    expect(costMicros(1, 0, { inputPicos: picosPerToken(0.499999), outputPicos: 0n })).toBe(0n);
    expect(costMicros(1_000_000, 1_000_000, { inputPicos: picosPerToken(2.5), outputPicos: picosPerToken(10) })).toBe(12_500_000n);
    // Far beyond floating-point exactness: 10^12 tokens at $0.000001 per million.
    expect(costMicros(1e12, 0, { inputPicos: picosPerToken(0.000001), outputPicos: 0n })).toBe(1_000_000n);
  });
});

describe('isExactPrice', () => {
  it('accepts prices from 0 to 1000000 USD per million tokens with at most 6 decimals', () => {
    expect(isExactPrice(0.15)).toBe(true);
    expect(isExactPrice(0.000001)).toBe(true);
    expect(isExactPrice(1_000_000)).toBe(true);
    expect(isExactPrice(0.0000001)).toBe(false);
    expect(isExactPrice(0.1 + 0.2)).toBe(false);
    expect(isExactPrice(1_000_000.5)).toBe(false);
    expect(isExactPrice(-1)).toBe(false);
    expect(isExactPrice(Number.NaN)).toBe(false);
    expect(isExactPrice(Number.POSITIVE_INFINITY)).toBe(false);
  });
});

describe('usdToMicros / microsToUsd', () => {
  it('rounds once, half up, from the decimal the client wrote', () => {
    expect(usdToMicros(12.5)).toBe(12_500_000n);
    expect(usdToMicros(0.000001)).toBe(1n);
    // 0.0000015 × 10^6 is 1.4999999999999998 in floating point; the decimal is exactly half a micro-dollar.
    expect(usdToMicros(0.0000015)).toBe(2n);
    expect(usdToMicros(0.0000014999)).toBe(1n);
    expect(usdToMicros(0.0000004)).toBe(0n);
    expect(usdToMicros(32.8513525)).toBe(32_851_353n);
    expect(usdToMicros(1e12)).toBe(1_000_000_000_000_000_000n);
    expect(usdToMicros(-0.0000015)).toBe(-2n);
    expect(() => usdToMicros(Number.NaN)).toThrow(RangeError);
  });

  it('gives back USD for the API', () => {
    expect(microsToUsd(525n)).toBe(0.000525);
    expect(microsToUsd(12_500_000n)).toBe(12.5);
    expect(microsToUsd(usdToMicros(0.15))).toBe(0.15);
  });
});
