/**
 * Moved to src/kernel/money.ts (the one money module). Kept only for importers owned by others, to be switched to the
 * kernel and then this file deleted: rest/inference.ts, rest/openai.ts, domain/inference/service.ts.
 */
export { MICROS_PER_USD, costMicros, isExactPrice, microsToUsd } from '../kernel/money.ts';
