import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { Input, ProjectIdField } from '../schema.ts';

/** The columns are PostgreSQL integers. */
export const MAX_LIMIT = 2_147_483_647;

const Limit = (minimum: number, description: string) =>
  Type.Integer({ minimum, maximum: MAX_LIMIT, description, ...says('must be an integer from {minimum} to {maximum}') });

/** PUT /v1/projects/{project_id}/rate-limits, GraphQL updateRateLimits: all three limits (CONTRACT §7). */
export const UpdateRateLimits = Input({
  project_id: ProjectIdField,
  requests_per_minute: Limit(1, 'Requests per minute for the project and for each of its keys.'),
  tokens_per_minute: Limit(1, 'Prompt plus completion tokens per minute for the project and for each of its keys.'),
  burst: Limit(0, 'Requests allowed at once above requests_per_minute (token bucket); 0: none.'),
});
export type UpdateRateLimits = Static<typeof UpdateRateLimits>;
