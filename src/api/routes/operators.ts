import type { FastifyPluginAsync } from 'fastify';
import { Type } from 'typebox';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import {
  getProjectIpAllowlist,
  listOperatorGroups,
  setGroupRoles,
  setProjectIpAllowlist,
  type GroupWithRoles,
  type ProjectIpAllowlist,
} from '../../domain/operators/access.ts';
import { NullableStr, UnixOrNull, Unix } from '../response-fields.ts';

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

/** presentOperatorGroup's answer. */
export const OperatorGroupObject = Type.Object(
  {
    id: Type.String({ description: 'The group id (grp_…).' }),
    object: Type.Literal('svc.operator_group'),
    display_name: Type.String({ description: 'The group\'s name, as SCIM provisioned it.' }),
    external_id: NullableStr('The identity provider\'s id for the group, or null.'),
    members: Type.Array(Type.String(), { description: 'The ids of the operators in the group.' }),
    roles: Type.Array(
      Type.Object({
        project_id: Type.String({ description: 'The project (prj_…).' }),
        role: Type.String({ description: 'viewer (reads) or admin (acts).' }),
      }),
      { description: 'The group\'s role per project.' },
    ),
    created_at: Unix('When the group was provisioned'),
  },
  { description: 'An operator group and its roles per project.' },
);

/** The operator groups' list: every group, in one page (no url: not paginated). */
const OperatorGroupList = Type.Object(
  {
    object: Type.Literal('list'),
    data: Type.Array(OperatorGroupObject, { description: 'Every operator group.' }),
    has_more: Type.Boolean({ description: 'Always false: the list is not paginated.' }),
  },
  { description: 'The operator groups.' },
);

/** presentIpAllowlist's answer. */
export const IpAllowlistObject = Type.Object(
  {
    object: Type.Literal('svc.ip_allowlist'),
    project_id: Type.String({ description: 'The project (prj_…).' }),
    cidrs: Type.Array(Type.String(), { description: 'The address ranges the console may be used from; empty: any.' }),
    updated_at: UnixOrNull('When the allowlist was last set'),
  },
  { description: 'A project\'s console IP allowlist.' },
);

const GroupParams = { type: 'object', properties: { group_id: { type: 'string', maxLength: 64 } }, required: ['group_id'] } as const;
const ProjectParams = { type: 'object', properties: { project_id: { type: 'string', maxLength: 64 } }, required: ['project_id'] } as const;

/**
 * Which operator groups reach which projects (the operator key), and each project's console IP allowlist. The bodies
 * are checked by the services against their TypeBox schemas (domain/operators/schema.ts), so that REST and GraphQL
 * name a nested field alike (`roles[0].role`); the route-level handler names only top-level fields so far.
 */
export const operatorsRoutes: FastifyPluginAsync = async (app) => {
  app.get('/v1/operator-groups', { config: { action: 'operator_group.list' }, schema: { response: { 200: OperatorGroupList } } }, async (req) => ({
    object: 'list',
    data: (await listOperatorGroups(req.ctx)).map(presentOperatorGroup),
    has_more: false,
  }));

  app.put<{ Params: { group_id: string } }>('/v1/operator-groups/:group_id/roles',
    { config: { action: 'operator_group.roles_update' }, schema: { params: GroupParams, response: { 200: OperatorGroupObject } } },
    async (req) => presentOperatorGroup(await setGroupRoles(req.ctx, req.params.group_id, req.body)),
  );

  app.get<{ Params: { project_id: string } }>('/v1/projects/:project_id/ip-allowlist', { config: { action: 'ip_allowlist.read' }, schema: { params: ProjectParams, response: { 200: IpAllowlistObject } } }, async (req) =>
    presentIpAllowlist(await getProjectIpAllowlist(req.ctx, req.params.project_id)),
  );

  app.put<{ Params: { project_id: string } }>('/v1/projects/:project_id/ip-allowlist',
    { config: { action: 'ip_allowlist.update' }, schema: { params: ProjectParams, response: { 200: IpAllowlistObject } } },
    async (req) => presentIpAllowlist(await setProjectIpAllowlist(req.ctx, req.params.project_id, req.body)),
  );
};
