import { getRateLimits, type ProjectRateLimits } from '../domain/rate-limits/service.ts';
import { UpdateRateLimits } from '../domain/rate-limits/schema.ts';
import { builder } from './builder.ts';
import { inputTypeFrom, serviceInput } from './inputs.ts';
import { updateRateLimits } from '../domain/governance/guarded.ts';

/** REST's svc.rate_limits object (spec 2.5, CONTRACT §7). */
export const RateLimitsRef = builder.objectRef<ProjectRateLimits>('RateLimits').implement({
  fields: (t) => ({
    projectId: t.exposeID('projectId'),
    requestsPerMinute: t.exposeInt('requestsPerMinute'),
    tokensPerMinute: t.exposeInt('tokensPerMinute'),
    burst: t.exposeInt('burst', { description: 'Requests allowed at once above requestsPerMinute (token bucket).' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds', nullable: true, description: 'null while the plan defaults apply.' }),
  }),
});

const RateLimitsInput = inputTypeFrom('RateLimitsInput', UpdateRateLimits, { omit: ['project_id'] });

builder.queryField('rateLimits', (t) =>
  t.field({
    type: RateLimitsRef,
    nullable: true,
    authScopes: { action: 'rate_limits.read' },
    args: { projectId: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getRateLimits(ctx, String(args.projectId)),
  }),
);

builder.mutationField('updateRateLimits', (t) =>
  t.field({
    type: RateLimitsRef,
    nullable: true,
    authScopes: { action: 'rate_limits.update' },
    description: 'Sets all three limits; the next request on every replica uses them. Audits and emits policy.updated.',
    args: { projectId: t.arg.id({ required: true }), input: t.arg({ type: RateLimitsInput, required: true }) },
    resolve: (_root, { projectId, input }, { ctx, ports }) =>
      updateRateLimits(ports.rateLimits, ctx, String(projectId), serviceInput(input)),
  }),
);
