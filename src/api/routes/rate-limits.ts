import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { unixOrNull } from '../../domain/context.ts';
import { getRateLimits, type ProjectRateLimits } from '../../domain/rate-limits/service.ts';
import { UpdateRateLimits } from '../../domain/rate-limits/schema.ts';
import { ProjectIdParams } from '../../domain/projects/schema.ts';
import { updateRateLimits } from '../../domain/governance/guarded.ts';
import { UnixOrNull } from '../response-fields.ts';

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

/** presentRateLimits's answer. */
export const RateLimitsObject = Type.Object(
  {
    object: Type.Literal('svc.rate_limits'),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    requests_per_minute: Type.Integer({ description: 'Requests allowed per minute.' }),
    tokens_per_minute: Type.Integer({ description: 'Tokens allowed per minute.' }),
    burst: Type.Integer({ description: 'Requests allowed at once above the per-minute rate.' }),
    updated_at: UnixOrNull('When the limits were last set; null while the plan defaults apply'),
  },
  { description: 'A project\'s rate limits (CONTRACT §7).' },
);

export const rateLimitsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.put('/v1/projects/:project_id/rate-limits', { config: { action: 'rate_limits.update' }, schema: { params: ProjectIdParams, body: UpdateRateLimits, response: { 200: RateLimitsObject } } }, async (req) =>
    presentRateLimits(await updateRateLimits(app.ports.rateLimits, req.ctx, req.params.project_id, req.body)),
  );

  app.get('/v1/projects/:project_id/rate-limits', { config: { action: 'rate_limits.read' }, schema: { params: ProjectIdParams, response: { 200: RateLimitsObject } } }, async (req) =>
    presentRateLimits(await getRateLimits(req.ctx, req.params.project_id)),
  );
};
