import type { Plan } from '../projects/schema.ts';

const KB = 1024;
const MB = 1024 * KB;

/**
 * CONTRACT §16: the largest diff a review or a pull-request summary takes, per plan, in UTF-8 bytes of the diff
 * (starter 200 KB = 204,800 bytes, growth 1 MB = 1,048,576, enterprise 5 MB = 5,242,880). Over it: 409 diff_too_large.
 */
export const DIFF_CAPS: Readonly<Record<Plan, number>> = { starter: 200 * KB, growth: 1 * MB, enterprise: 5 * MB };

export const diffCapOf = (plan: string): number => DIFF_CAPS[plan as Plan] ?? DIFF_CAPS.starter;

/**
 * The body a diff route reads at most: the largest cap, JSON-escaped (a diff's newlines and quotes double), plus room
 * for the other fields. A body over it is over every plan's cap: 409 diff_too_large as well (api/error-handler.ts).
 */
export const DIFF_BODY_LIMIT = 2 * DIFF_CAPS.enterprise + 1 * MB;

/** "200 KB", "1 MB" */
export const showSize = (bytes: number): string => (bytes >= MB ? `${bytes / MB} MB` : `${bytes / KB} KB`);
