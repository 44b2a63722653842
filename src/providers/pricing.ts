/**
 * Money is integer micro-dollars. A price of P USD per million tokens is P micro-dollars per token, so it is kept as
 * round(P × 10^6) pico-dollars per token (prices have at most 6 decimals; the providers file is refused otherwise),
 * and a cost is exact until one final rounding to the micro-dollar.
 */

export const MICROS_PER_USD = 1_000_000;
const PICO_PER_MICRO = 1_000_000n;

/** Whether a USD-per-million-tokens price can be held exactly (at most 6 decimals). */
export function isExactPrice(usdPerMtok: number): boolean {
  if (!Number.isFinite(usdPerMtok) || usdPerMtok < 0 || usdPerMtok > 1_000_000) return false;
  return Number(usdPerMtok.toFixed(6)) === usdPerMtok;
}

/** Pico-dollars per token. */
export function priceUnits(usdPerMtok: number): bigint {
  return BigInt(Math.round(usdPerMtok * 1e6));
}

export interface PricedModel {
  inputUnits: bigint;
  outputUnits: bigint;
}

/**
 * prompt × input price + completion × output price, rounded once, half up, to the micro-dollar.
 * Example: 1,234 prompt tokens at $0.15/Mtok and 567 completion tokens at $0.60/Mtok = 185.1 + 340.2 = 525.3 µ$ → 525 µ$.
 */
export function costMicros(promptTokens: number, completionTokens: number, price: PricedModel): bigint {
  const pico = BigInt(promptTokens) * price.inputUnits + BigInt(completionTokens) * price.outputUnits;
  return (pico + PICO_PER_MICRO / 2n) / PICO_PER_MICRO;
}

export const microsToUsd = (micros: bigint): number => Number(micros) / MICROS_PER_USD;
