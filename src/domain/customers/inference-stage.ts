import { invalid } from '../../errors/svc-error.ts';
import type { RateLimitTicket } from '../../limits/index.ts';
import type { Ctx } from '../context.ts';
import type { CustomerPolicies } from './ports.ts';
import { CUSTOMER_ID_RE, CUSTOMER_ID_RULE } from './schema.ts';
import type { BudgetedCustomer } from './scope.ts';

/** The end customer an inference names, with its budget (its windows ride on the request's ticket). */
export type BoundCustomer = BudgetedCustomer;

/**
 * The end customer a request names (CONTRACT §22): the X-Svc-Customer header when sent, else the body's field (`user`
 * on the OpenAI routes, `metadata.user_id` on /v1/messages, which arrives here as `user`). The header wins when both
 * are sent: it is the gateway's own channel, set by the team's backend on any route, while `user` is passed on to the
 * provider as it came. null: none named. 400 invalid_request naming the field for an id outside the rule.
 */
export function customerOf(ctx: Ctx, user: string | null | undefined, param = 'user'): string | null {
  const header = ctx.customerHeader;
  if (header !== undefined) {
    if (!CUSTOMER_ID_RE.test(header)) throw invalid('X-Svc-Customer', `X-Svc-Customer ${CUSTOMER_ID_RULE}.`);
    return header;
  }
  if (user === null || user === undefined) return null;
  if (!CUSTOMER_ID_RE.test(user)) throw invalid(param, `${param} names the end customer and ${CUSTOMER_ID_RULE}.`);
  return user;
}

/**
 * Names the request's end customer and loads its bounds (the customer cache: no SQL in the steady state). Its windows
 * join the key's and the project's on the request's ticket, so the reservation takes them in the same script call;
 * its budget is returned for the budget check, which reads its counter in the same MGET as the key's and the project's.
 */
export async function bindCustomer(
  policies: Pick<CustomerPolicies, 'get'> | undefined,
  ctx: Ctx,
  ticket: RateLimitTicket,
  projectId: string,
  user: string | null | undefined,
  param = 'user',
): Promise<BoundCustomer | null> {
  const id = customerOf(ctx, user, param);
  if (id === null) return null;
  const policy = policies ? await policies.get(projectId, id) : null;
  if (policy && (policy.requestsPerMinute !== null || policy.tokensPerMinute !== null)) {
    ticket.bindCustomer({ id, requestsPerMinute: policy.requestsPerMinute, tokensPerMinute: policy.tokensPerMinute, version: policy.limitsVersion });
  }
  return { id, budgetMicros: policy?.budgetMicros ?? null, hardStop: policy?.hardStop ?? true };
}
