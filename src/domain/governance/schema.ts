import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { GUARDED_RESOURCES } from '../auth/actions.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, Nullable, PathId, ProjectIdField, ProjectIdFilter, Region } from '../schema.ts';
import { APPROVAL_STATUSES } from './store.ts';

export const MAX_REASON_LENGTH = 1000;

/** PUT /v1/projects/{project_id}/governance, GraphQL setGovernancePolicy (CONTRACT §15). */
export const SetGovernance = Input({
  project_id: ProjectIdField,
  dual_control: Type.Array(
    Type.Enum(GUARDED_RESOURCES, { ...says(`must be one of ${GUARDED_RESOURCES.join(', ')}`) }),
    {
      description: `The guarded resources: ${GUARDED_RESOURCES.join(', ')}. Empty: no dual control.`,
      ...says({ type: 'must be an array of resource names' }),
    },
  ),
});
export type SetGovernance = Static<typeof SetGovernance>;

/** PUT /v1/projects/{project_id}/residency, GraphQL setResidency (CONTRACT §15): a region, or null to unpin. */
export const SetResidency = Input({
  project_id: ProjectIdField,
  region: Nullable(Region('The region the project is pinned to; null unpins it.'), {
    ...says('must be a lower-case region name such as eu-west-1, or null'),
  }),
});
export type SetResidency = Static<typeof SetResidency>;

/** GET /v1/approvals, GraphQL approvals. */
export const ListApprovalsQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  status: Type.Optional(
    Type.Enum(APPROVAL_STATUSES, { description: 'Only approvals in this status.', ...says(`must be one of ${APPROVAL_STATUSES.join(', ')}`) }),
  ),
});
export type ListApprovalsQuery = Static<typeof ListApprovalsQuery>;

/** POST /v1/approvals/{approval_id}/reject, GraphQL rejectApproval. */
export const RejectApproval = Input({
  project_id: ProjectIdField,
  reason: Type.Optional(
    Nullable(Type.String({ maxLength: MAX_REASON_LENGTH, description: 'Why the change was rejected (shown to the requester).' }), {
      ...says(`must be a string of at most ${MAX_REASON_LENGTH} characters`),
    }),
  ),
});
export type RejectApproval = Static<typeof RejectApproval>;

export const ApprovalIdParams = PathId('approval_id', 'The approval\'s id (apr_…).');
