import type { FastifyPluginAsync } from 'fastify';
import { unixOrNull } from '../domain/context.ts';
import { getGovernancePolicy, type GovernancePolicy, type Residency, type SetGovernanceInput, type SetResidencyInput } from '../domain/governance/policy.ts';
import { setGovernancePolicy, setResidency } from '../domain/governance/guarded.ts';

/** The project's dual control policy (CONTRACT §15). */
export function presentGovernance(p: GovernancePolicy) {
  return {
    object: 'svc.governance' as const,
    project_id: p.projectId,
    dual_control: p.dualControl,
    updated_at: unixOrNull(p.updatedAt),
  };
}

/** The project's residency pin (CONTRACT §15); region null: not pinned. */
export function presentResidency(r: Residency) {
  return { object: 'svc.residency' as const, project_id: r.projectId, region: r.region };
}

const ProjectIdParams = {
  type: 'object',
  properties: { project_id: { type: 'string' } },
  required: ['project_id'],
} as const;

export const governanceRoutes: FastifyPluginAsync = async (app) => {
  app.put<{ Params: { project_id: string }; Body: SetGovernanceInput }>(
    '/v1/projects/:project_id/governance',
    {
      schema: {
        params: ProjectIdParams,
        // Items are checked by the service, so that errors name dual_control[i] on both surfaces.
        body: { type: 'object', additionalProperties: false, required: ['dual_control'], properties: { project_id: { type: ['string', 'null'] }, dual_control: {} } },
      },
    },
    async (req) => presentGovernance(await setGovernancePolicy(req.ctx, req.params.project_id, req.body)),
  );

  app.get<{ Params: { project_id: string } }>('/v1/projects/:project_id/governance', { schema: { params: ProjectIdParams } }, async (req) =>
    presentGovernance(await getGovernancePolicy(req.ctx, req.params.project_id)),
  );

  app.put<{ Params: { project_id: string }; Body: SetResidencyInput }>(
    '/v1/projects/:project_id/residency',
    {
      schema: {
        params: ProjectIdParams,
        body: { type: 'object', additionalProperties: false, required: ['region'], properties: { project_id: { type: ['string', 'null'] }, region: {} } },
      },
    },
    async (req) => presentResidency(await setResidency(app.ports.projects, req.ctx, req.params.project_id, req.body)),
  );
};
