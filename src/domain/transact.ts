import type { Tx } from '../db/client.ts';
import type { Ctx } from './context.ts';

/**
 * How a guarded service's apply step opens its transaction. Called directly, it is the request's own
 * (`ctx.db.$transaction`); when an approval applies the change (domain/governance/approvals.ts), it is one that claims
 * the approval first and records the result's id last, so the change and the decision commit together. An apply that
 * changes nothing (disabling a disabled webhook) does not call it.
 */
export type Transact = <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>;

export const ownTransaction =
  (ctx: Ctx): Transact =>
  (fn) =>
    ctx.db.$transaction(fn);

/** What a guarded service's check step yields: the project the change addresses, and what apply needs. */
export interface Checked {
  projectId: string;
}
