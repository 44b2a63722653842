import type { InferenceOutcome } from '../../domain/usage/outcome.ts';

/** The write-ahead form of an outcome (a Redis stream field): JSON, money as a decimal string, times in ms. */
export function encodeOutcome(o: InferenceOutcome): string {
  return JSON.stringify({ ...o, costMicros: o.costMicros.toString(), createdAt: o.createdAt.getTime() });
}

export function decodeOutcome(text: string): InferenceOutcome {
  const raw = JSON.parse(text) as Omit<InferenceOutcome, 'costMicros' | 'createdAt'> & { costMicros: string; createdAt: number };
  return { ...raw, costMicros: BigInt(raw.costMicros), createdAt: new Date(raw.createdAt) };
}
