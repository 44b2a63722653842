import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, ProjectIdFilter } from '../schema.ts';

export const AUDIT_MAX_PAGE_SIZE = 500;

/** GET /v1/audit/events, GraphQL auditEvents. */
export const AuditQuery = Input({
  ...pageQueryProperties(AUDIT_MAX_PAGE_SIZE),
  project_id: ProjectIdFilter,
  action: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 100,
      description: 'Only entries of this action (key.revoke, …; GraphQL auditActions lists them).',
      ...says('must be 1 to 100 characters'),
    }),
  ),
});
export type AuditQuery = Static<typeof AuditQuery>;
