import {
  getProjectIpAllowlist,
  listOperatorGroups,
  setGroupRoles,
  setProjectIpAllowlist,
  type GroupWithRoles,
  type ProjectIpAllowlist,
} from '../domain/operators/access.ts';
import { builder } from './builder.ts';

const GroupRoleRef = builder.objectRef<{ projectId: string; role: string }>('OperatorGroupRole').implement({
  fields: (t) => ({ projectId: t.exposeID('projectId'), role: t.exposeString('role', { description: 'viewer (reads) or admin (acts).' }) }),
});

const OperatorGroupRef = builder.objectRef<GroupWithRoles>('OperatorGroup').implement({
  description: 'A group of console operators, provisioned by SCIM, with its role per project (REST svc.operator_group).',
  fields: (t) => ({
    id: t.exposeID('id'),
    displayName: t.exposeString('displayName'),
    externalId: t.exposeString('externalId', { nullable: true }),
    members: t.idList({ resolve: (g) => g.members.map((m) => m.operatorId) }),
    roles: t.field({ type: [GroupRoleRef], resolve: (g) => g.roles }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
  }),
});

const IpAllowlistRef = builder.objectRef<ProjectIpAllowlist>('IpAllowlist').implement({
  description: "A project's console IP allowlist (REST svc.ip_allowlist); empty: any address.",
  fields: (t) => ({
    projectId: t.exposeID('projectId'),
    cidrs: t.exposeStringList('cidrs'),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

const GroupRoleInput = builder.inputType('OperatorGroupRoleInput', {
  fields: (t) => ({ projectId: t.id({ required: true }), role: t.string({ required: true }) }),
});

builder.queryField('operatorGroups', (t) =>
  t.field({
    type: [OperatorGroupRef],
    authScopes: { action: 'operator_group.list' },
    description: 'Operator key only.',
    resolve: (_root, _args, { ctx }) => listOperatorGroups(ctx),
  }),
);

builder.mutationField('setOperatorGroupRoles', (t) =>
  t.field({
    type: OperatorGroupRef,
    authScopes: { action: 'operator_group.roles_update' },
    description: "Operator key only. Replaces the group's roles; its members' next request uses them.",
    args: { groupId: t.arg.id({ required: true }), roles: t.arg({ type: [GroupRoleInput], required: true }) },
    resolve: (_root, args, { ctx }) =>
      setGroupRoles(ctx, String(args.groupId), { roles: args.roles.map((r) => ({ project_id: String(r.projectId), role: r.role })) }),
  }),
);

builder.queryField('projectIpAllowlist', (t) =>
  t.field({
    type: IpAllowlistRef,
    authScopes: { action: 'ip_allowlist.read' },
    args: { projectId: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getProjectIpAllowlist(ctx, String(args.projectId)),
  }),
);

builder.mutationField('setProjectIpAllowlist', (t) =>
  t.field({
    type: IpAllowlistRef,
    authScopes: { action: 'ip_allowlist.update' },
    args: { projectId: t.arg.id({ required: true }), cidrs: t.arg.stringList({ required: true }) },
    resolve: (_root, args, { ctx }) => setProjectIpAllowlist(ctx, String(args.projectId), { cidrs: args.cidrs }),
  }),
);
