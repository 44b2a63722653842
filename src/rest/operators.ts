import type { FastifyPluginAsync } from 'fastify';
import { unixOrNull, unixSeconds } from '../domain/context.ts';
import {
  getProjectIpAllowlist,
  listOperatorGroups,
  setGroupRoles,
  setProjectIpAllowlist,
  type GroupWithRoles,
  type ProjectIpAllowlist,
} from '../domain/operators/access.ts';

/** An operator group (provisioned by SCIM) with its roles per project. */
export function presentOperatorGroup(g: GroupWithRoles) {
  return {
    id: g.id,
    object: 'svc.operator_group' as const,
    display_name: g.displayName,
    external_id: g.externalId,
    members: g.members.map((m) => m.operatorId),
    roles: g.roles.map((r) => ({ project_id: r.projectId, role: r.role })),
    created_at: unixSeconds(g.createdAt),
  };
}

export function presentIpAllowlist(a: ProjectIpAllowlist) {
  return { object: 'svc.ip_allowlist' as const, project_id: a.projectId, cidrs: a.cidrs, updated_at: unixOrNull(a.updatedAt) };
}

const GroupParams = { type: 'object', properties: { group_id: { type: 'string', maxLength: 64 } }, required: ['group_id'] } as const;
const ProjectParams = { type: 'object', properties: { project_id: { type: 'string', maxLength: 64 } }, required: ['project_id'] } as const;

/**
 * Which operator groups reach which projects (the operator key), and each project's console IP allowlist. The bodies
 * are checked by the services against their TypeBox schemas (domain/operators/schema.ts), so that REST and GraphQL
 * name a nested field alike (`roles[0].role`); the route-level handler names only top-level fields so far.
 */
export const operatorsRoutes: FastifyPluginAsync = async (app) => {
  app.get('/v1/operator-groups', async (req) => ({
    object: 'list',
    data: (await listOperatorGroups(req.ctx)).map(presentOperatorGroup),
    has_more: false,
  }));

  app.put<{ Params: { group_id: string } }>(
    '/v1/operator-groups/:group_id/roles',
    { schema: { params: GroupParams } },
    async (req) => presentOperatorGroup(await setGroupRoles(req.ctx, req.params.group_id, req.body)),
  );

  app.get<{ Params: { project_id: string } }>('/v1/projects/:project_id/ip-allowlist', { schema: { params: ProjectParams } }, async (req) =>
    presentIpAllowlist(await getProjectIpAllowlist(req.ctx, req.params.project_id)),
  );

  app.put<{ Params: { project_id: string } }>(
    '/v1/projects/:project_id/ip-allowlist',
    { schema: { params: ProjectParams } },
    async (req) => presentIpAllowlist(await setProjectIpAllowlist(req.ctx, req.params.project_id, req.body)),
  );
};
