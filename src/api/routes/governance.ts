import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { unixOrNull } from '../../domain/context.ts';
import { getGovernancePolicy, type GovernancePolicy, type Residency } from '../../domain/governance/policy.ts';
import { SetGovernance, SetResidency } from '../../domain/governance/schema.ts';
import { ProjectIdParams } from '../../domain/projects/schema.ts';
import { setGovernancePolicy, setResidency } from '../../domain/governance/guarded.ts';
import { NullableStr, UnixOrNull } from '../response-fields.ts';

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

/** presentGovernance's answer. */
export const GovernanceObject = Type.Object(
  {
    object: Type.Literal('svc.governance'),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    dual_control: Type.Array(Type.String(), { description: 'The resources whose changes need a second key\'s approval.' }),
    updated_at: UnixOrNull('When the policy was last set'),
  },
  { description: 'A project\'s dual control policy (CONTRACT §15).' },
);

/** presentResidency's answer. */
export const ResidencyObject = Type.Object(
  {
    object: Type.Literal('svc.residency'),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    region: NullableStr('The region the project is pinned to, or null: not pinned.'),
  },
  { description: 'A project\'s residency pin (CONTRACT §15).' },
);

export const governanceRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.put('/v1/projects/:project_id/governance', { config: { action: 'governance.update' }, schema: { params: ProjectIdParams, body: SetGovernance, response: { 200: GovernanceObject } } }, async (req) =>
    presentGovernance(await setGovernancePolicy(req.ctx, req.params.project_id, req.body)),
  );

  app.get('/v1/projects/:project_id/governance', { config: { action: 'governance.read' }, schema: { params: ProjectIdParams, response: { 200: GovernanceObject } } }, async (req) =>
    presentGovernance(await getGovernancePolicy(req.ctx, req.params.project_id)),
  );

  app.put('/v1/projects/:project_id/residency', { config: { action: 'residency.update' }, schema: { params: ProjectIdParams, body: SetResidency, response: { 200: ResidencyObject } } }, async (req) =>
    presentResidency(await setResidency(app.ports.projects, req.ctx, req.params.project_id, req.body)),
  );
};
