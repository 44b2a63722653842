import type { FastifyPluginAsync } from 'fastify';
import { unixOrNull } from '../domain/context.ts';
import { getRateLimits, type ProjectRateLimits, type UpdateRateLimitsInput } from '../domain/rate-limits/service.ts';
import { updateRateLimits } from '../domain/governance/guarded.ts';

/** CONTRACT §7: the rate-limit object. updated_at is null while the plan defaults apply (our addition to GET). */
export function presentRateLimits(l: ProjectRateLimits) {
  return {
    object: 'svc.rate_limits' as const,
    project_id: l.projectId,
    requests_per_minute: l.requestsPerMinute,
    tokens_per_minute: l.tokensPerMinute,
    burst: l.burst,
    updated_at: unixOrNull(l.updatedAt),
  };
}

const ProjectIdParams = {
  type: 'object',
  properties: { project_id: { type: 'string' } },
  required: ['project_id'],
} as const;

export const rateLimitsRoutes: FastifyPluginAsync = async (app) => {
  app.put<{ Params: { project_id: string }; Body: UpdateRateLimitsInput }>(
    '/v1/projects/:project_id/rate-limits',
    {
      schema: {
        params: ProjectIdParams,
        // Types and ranges are checked by the service, so that GraphQL gives the same errors.
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['requests_per_minute', 'tokens_per_minute', 'burst'],
          properties: { project_id: { type: ['string', 'null'] }, requests_per_minute: {}, tokens_per_minute: {}, burst: {} },
        },
      },
    },
    async (req) => presentRateLimits(await updateRateLimits(app.ports.rateLimits, req.ctx, req.params.project_id, req.body)),
  );

  app.get<{ Params: { project_id: string } }>(
    '/v1/projects/:project_id/rate-limits',
    { schema: { params: ProjectIdParams } },
    async (req) => presentRateLimits(await getRateLimits(req.ctx, req.params.project_id)),
  );
};
