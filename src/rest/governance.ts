import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { unixOrNull } from '../domain/context.ts';
import { getGovernancePolicy, type GovernancePolicy, type Residency } from '../domain/governance/policy.ts';
import { SetGovernance, SetResidency } from '../domain/governance/schema.ts';
import { ProjectIdParams } from '../domain/projects/schema.ts';
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

export const governanceRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.put('/v1/projects/:project_id/governance', { schema: { params: ProjectIdParams, body: SetGovernance } }, async (req) =>
    presentGovernance(await setGovernancePolicy(req.ctx, req.params.project_id, req.body)),
  );

  app.get('/v1/projects/:project_id/governance', { schema: { params: ProjectIdParams } }, async (req) =>
    presentGovernance(await getGovernancePolicy(req.ctx, req.params.project_id)),
  );

  app.put('/v1/projects/:project_id/residency', { schema: { params: ProjectIdParams, body: SetResidency } }, async (req) =>
    presentResidency(await setResidency(app.ports.projects, req.ctx, req.params.project_id, req.body)),
  );
};
