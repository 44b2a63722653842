import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, ProjectIdFilter } from '../schema.ts';

/** A UTC date; the service checks besides that it is a day of the calendar, 1970-01-01 or later. */
const Day = (description: string) =>
  Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description, ...says('must be a date as YYYY-MM-DD') }));

/**
 * GET /v1/usage, GraphQL usage and usageByDay. granularity=day takes no pagination parameter (the service says so:
 * the rule joins two fields).
 */
export const UsageQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  granularity: Type.Optional(
    Type.Enum(['request', 'day'], {
      description: 'request (default): usage records, newest first; day: one row per UTC day with usage.',
      ...says('must be request or day'),
    }),
  ),
  start_date: Day('The first day (UTC, inclusive), YYYY-MM-DD.'),
  end_date: Day('The last day (UTC, inclusive), YYYY-MM-DD.'),
  customer: Type.Optional(
    Type.String({ minLength: 1, maxLength: 256, description: 'Only the usage of this end customer (CONTRACT §22).', ...says('must be a customer id of 1 to 256 characters') }),
  ),
});
export type UsageQuery = Static<typeof UsageQuery>;
