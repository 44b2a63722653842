/**
 * Money, in one place. Amounts are integer micro-dollars (µ$, bigint) wherever they are stored, added or compared, and
 * USD (a JS number) only where the API shows or takes them. A price of P USD per million tokens is P µ$ per token, kept
 * as P × 10^6 pico-dollars per token: exact, since the providers file allows at most 6 decimals. A cost is therefore
 * exact until its one rounding, half up, to the micro-dollar.
 */

export const MICROS_PER_USD = 1_000_000;
const PICOS_PER_MICRO = 1_000_000n;
/** The highest price the providers file accepts, in USD per million tokens. */
export const MAX_PRICE_USD_PER_MTOK = 1_000_000;

/** A model's price in pico-dollars per token (see picosPerToken). */
export interface PicoPrice {
  inputPicos: bigint;
  outputPicos: bigint;
  /** Prompt tokens read from the provider's prompt cache; absent: the input price. */
  cacheReadPicos?: bigint;
  /** Prompt tokens written to the provider's prompt cache; absent: the input price. */
  cacheWritePicos?: bigint;
}

/**
 * |value| = digits × 10^exponent, read from the number's shortest decimal form (what the client or the providers file
 * wrote), not computed as value × 10^6 in floating point, which can land under a half (0.0000015 × 10^6 is
 * 1.4999999999999998).
 */
function decimal(value: number): { digits: bigint; exponent: number } {
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(Math.abs(value)));
  if (!m) throw new RangeError(`not a finite amount: ${value}`);
  const fraction = m[2] ?? '';
  return { digits: BigInt(m[1]! + fraction), exponent: Number(m[3] ?? 0) - fraction.length };
}

/** `value` × 10^6 as an integer, rounded once, half up (half away from zero for a negative value). */
function times1e6(value: number): bigint {
  const { digits, exponent } = decimal(value);
  const shift = exponent + 6;
  let scaled: bigint;
  if (shift >= 0) scaled = digits * 10n ** BigInt(shift);
  else {
    const unit = 10n ** BigInt(-shift);
    scaled = (digits + unit / 2n) / unit;
  }
  return value < 0 ? -scaled : scaled;
}

/** USD as whole micro-dollars, rounded once, half up: 0.0000015 → 2 µ$, 0.0000014 → 1 µ$. Throws on NaN or ±Infinity. */
export function usdToMicros(usd: number): bigint {
  return times1e6(usd);
}

/** Micro-dollars as USD, for the API's `*_usd` fields and event data. */
export function microsToUsd(micros: bigint): number {
  return Number(micros) / MICROS_PER_USD;
}

/** Whether a USD-per-million-tokens price is in range and can be held exactly (at most 6 decimals). */
export function isExactPrice(usdPerMtok: number): boolean {
  if (!Number.isFinite(usdPerMtok) || usdPerMtok < 0 || usdPerMtok > MAX_PRICE_USD_PER_MTOK) return false;
  return decimal(usdPerMtok).exponent >= -6;
}

/** A USD-per-million-tokens price as pico-dollars per token (the same number × 10^6; exact for an exact price). */
export function picosPerToken(usdPerMtok: number): bigint {
  return times1e6(usdPerMtok);
}

/**
 * prompt × input price + completion × output price, rounded once, half up, to the micro-dollar.
 * Example: 1,234 prompt tokens at $0.15/Mtok and 567 completion tokens at $0.60/Mtok = 185.1 + 340.2 = 525.3 µ$ → 525 µ$.
 */
export function costMicros(promptTokens: number, completionTokens: number, price: PicoPrice): bigint {
  const picos = BigInt(promptTokens) * price.inputPicos + BigInt(completionTokens) * price.outputPicos;
  return (picos + PICOS_PER_MICRO / 2n) / PICOS_PER_MICRO;
}

/**
 * A provider's usage at the model's prices: the prompt's cache reads and writes (parts of promptTokens) at the cache
 * prices where the providers file sets them, the rest of the prompt at the input price, the output at the output price;
 * rounded once, half up. Without cache tokens or cache prices it is costMicros(promptTokens, completionTokens, price).
 * Example: 10,000 prompt tokens of which 8,000 cache reads, at $3/Mtok input and $0.30/Mtok cache read, and 100 output
 * tokens at $15/Mtok = 6,000 + 2,400 + 1,500 = 9,900 µ$.
 */
export function usageCostMicros(
  usage: { promptTokens: number; completionTokens: number; cacheReadTokens?: number; cacheWriteTokens?: number },
  price: PicoPrice,
): bigint {
  const read = price.cacheReadPicos !== undefined ? Math.min(usage.cacheReadTokens ?? 0, usage.promptTokens) : 0;
  const write = price.cacheWritePicos !== undefined ? Math.min(usage.cacheWriteTokens ?? 0, usage.promptTokens - read) : 0;
  if (read === 0 && write === 0) return costMicros(usage.promptTokens, usage.completionTokens, price);
  const picos =
    BigInt(usage.promptTokens - read - write) * price.inputPicos +
    (read === 0 ? 0n : BigInt(read) * price.cacheReadPicos!) +
    (write === 0 ? 0n : BigInt(write) * price.cacheWritePicos!) +
    BigInt(usage.completionTokens) * price.outputPicos;
  return (picos + PICOS_PER_MICRO / 2n) / PICOS_PER_MICRO;
}
