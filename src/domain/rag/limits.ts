import type { Plan } from '../projects/schema.ts';

const MB = 1024 * 1024;

/** CONTRACT §13: the largest document each plan may upload (bytes of the upload: the file, or the content's UTF-8). */
export const DOCUMENT_LIMITS: Readonly<Record<Plan, number>> = { starter: 1 * MB, growth: 10 * MB, enterprise: 50 * MB };

/** The largest limit of any plan: what the upload routes let through before the plan is known. */
export const MAX_DOCUMENT_BYTES = DOCUMENT_LIMITS.enterprise;

export function documentLimitOf(plan: string): number {
  return DOCUMENT_LIMITS[plan as Plan] ?? DOCUMENT_LIMITS.starter;
}

/** "1 MB" */
export const showBytes = (n: number): string => `${Math.round(n / MB)} MB`;
