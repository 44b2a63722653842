import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { BudgetUsd } from '../keys/schema.ts';
import { MAX_LIMIT } from '../rate-limits/schema.ts';
import { Input, Nullable, ProjectIdField } from '../schema.ts';
import { pageQueryProperties } from '../pagination.ts';

/**
 * An end customer's id (CONTRACT §22), as `user`, `metadata.user_id` or X-Svc-Customer name it: 1 to 256 printable
 * ASCII characters (OpenAI's `user` allows 256), not beginning or ending with a space. Hash an e-mail address or a name
 * outside ASCII first, as OpenAI advises for `user`.
 */
export const CUSTOMER_ID_PATTERN = '^[\\x21-\\x7E](?:[\\x20-\\x7E]{0,254}[\\x21-\\x7E])?$';
export const CUSTOMER_ID_RE = new RegExp(CUSTOMER_ID_PATTERN);
export const CUSTOMER_ID_RULE = 'must be 1 to 256 printable ASCII characters, not beginning or ending with a space';

/** The header any inbound route takes to name the end customer (CONTRACT §22). */
export const CUSTOMER_HEADER = 'x-svc-customer';

export const CustomerParams = Type.Object({
  project_id: Type.String({ description: 'The project (prj_…).' }),
  customer: Type.String({ description: 'The end customer\'s id, as inferences name it (URL-encoded).' }),
});
export type CustomerParams = Static<typeof CustomerParams>;

/** PUT /v1/projects/{project_id}/customers/{customer}/budget, GraphQL updateCustomerBudget. */
export const UpdateCustomerBudget = Input({
  project_id: ProjectIdField,
  budget_usd: BudgetUsd('The customer\'s monthly budget in USD (calendar month, UTC); null removes it.', ', or null to remove the budget'),
  hard_stop: Type.Optional(
    Type.Boolean({
      description: 'true (default): at or over budget the customer\'s inferences get 429 budget_exceeded. false: alerts only.',
      ...says('must be true or false'),
    }),
  ),
});
export type UpdateCustomerBudget = Static<typeof UpdateCustomerBudget>;

const Limit = (description: string) =>
  Nullable(Type.Integer({ minimum: 1, maximum: MAX_LIMIT }), {
    description,
    ...says({ type: 'must be an integer from 1 to 2147483647, or null for no window', minimum: 'must be an integer from 1 to 2147483647, or null for no window', maximum: 'must be an integer from 1 to 2147483647, or null for no window' }),
  });

/** PUT /v1/projects/{project_id}/customers/{customer}/rate-limits, GraphQL updateCustomerRateLimits: both fields. */
export const UpdateCustomerRateLimits = Input({
  project_id: ProjectIdField,
  requests_per_minute: Limit('Inference requests per minute for this customer, across every key of the project; null: no window.'),
  tokens_per_minute: Limit('Prompt plus completion tokens per minute for this customer; null: no window.'),
});
export type UpdateCustomerRateLimits = Static<typeof UpdateCustomerRateLimits>;

/** GET /v1/projects/{project_id}/customers. */
export const CustomerListQuery = Input({
  ...pageQueryProperties(),
  // Customer ids run to 256 characters: so do the cursors of their list.
  starting_after: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'A customer id of this list: the page of customers seen before it.', ...says('must be a customer id of this list') })),
  ending_before: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'A customer id of this list: the page of customers seen after it.', ...says('must be a customer id of this list') })),
});
export type CustomerListQuery = Static<typeof CustomerListQuery>;
