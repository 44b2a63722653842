import {
  getProjectIpAllowlist,
  listOperatorGroups,
  setGroupRoles,
  setProjectIpAllowlist,
  type GroupWithRoles,
  type ProjectIpAllowlist,
} from '../domain/operators/access.ts';
import { describeSignIn, listOperatorDirectory, type DirectoryEntry } from '../domain/operators/directory.ts';
import type { SignInSettings } from '../domain/operators/ports.ts';
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

const OperatorGroupBriefRef = builder.objectRef<{ id: string; displayName: string }>('OperatorGroupBrief').implement({
  fields: (t) => ({ id: t.exposeID('id'), displayName: t.exposeString('displayName') }),
});

const OperatorSignInRef = builder.objectRef<{ at: Date; method: string | null }>('OperatorSignIn').implement({
  description: "An operator's newest operator.sign_in audit row.",
  fields: (t) => ({
    at: t.expose('at', { type: 'UnixSeconds' }),
    method: t.exposeString('method', { nullable: true, description: 'oidc or saml.' }),
  }),
});

const OperatorRef = builder.objectRef<DirectoryEntry>('Operator').implement({
  description: 'A console operator provisioned by SCIM (SCIM User opr_…), with its groups and resulting roles.',
  fields: (t) => ({
    id: t.id({ resolve: (e) => e.operator.id }),
    userName: t.string({ resolve: (e) => e.operator.userName }),
    displayName: t.string({ nullable: true, resolve: (e) => e.operator.displayName }),
    email: t.string({ nullable: true, resolve: (e) => e.operator.email }),
    externalId: t.string({ nullable: true, resolve: (e) => e.operator.externalId }),
    active: t.boolean({ description: 'false: deprovisioned by SCIM (active: false); it cannot sign in.', resolve: (e) => e.operator.active }),
    groups: t.field({ type: [OperatorGroupBriefRef], resolve: (e) => e.groups }),
    roles: t.field({
      type: [GroupRoleRef],
      description: "Per project, the strongest role of the operator's groups (what its next request gets).",
      resolve: (e) => e.roles,
    }),
    lastSignIn: t.field({ type: OperatorSignInRef, nullable: true, resolve: (e) => e.lastSignIn }),
    createdAt: t.field({ type: 'UnixSeconds', resolve: (e) => e.operator.createdAt }),
    updatedAt: t.field({ type: 'UnixSeconds', resolve: (e) => e.operator.updatedAt }),
  }),
});

const OidcSettingsRef = builder.objectRef<NonNullable<SignInSettings['oidc']>>('OidcSignInSettings').implement({
  fields: (t) => ({
    issuer: t.exposeString('issuer'),
    clientId: t.exposeString('clientId'),
    usernameClaim: t.exposeString('usernameClaim'),
    scopes: t.exposeString('scopes'),
    redirectUri: t.exposeString('redirectUri'),
  }),
});

const SamlSettingsRef = builder.objectRef<NonNullable<SignInSettings['saml']>>('SamlSignInSettings').implement({
  fields: (t) => ({
    entryPoint: t.exposeString('entryPoint'),
    entityId: t.exposeString('entityId'),
    acsUrl: t.exposeString('acsUrl'),
    metadataUrl: t.exposeString('metadataUrl'),
  }),
});

const ScimSettingsRef = builder.objectRef<NonNullable<SignInSettings['scim']>>('ScimSettings').implement({
  fields: (t) => ({ baseUrl: t.exposeString('baseUrl') }),
});

type SignInRow = ReturnType<typeof describeSignIn>;
const SignInSettingsRef = builder.objectRef<SignInRow>('SignInSettings').implement({
  description: 'How operators sign in to the console, as configured; never a secret (no client secret, certificate or token).',
  fields: (t) => ({
    oidc: t.field({ type: OidcSettingsRef, nullable: true, description: 'null: SVC_OIDC_ISSUER unset.', resolve: (s) => s.oidc }),
    saml: t.field({ type: SamlSettingsRef, nullable: true, description: 'null: SVC_SAML_ENTRY_POINT unset.', resolve: (s) => s.saml }),
    scim: t.field({ type: ScimSettingsRef, nullable: true, description: 'null: SCIM is off (SVC_SCIM_TOKEN unset).', resolve: (s) => s.scim }),
    consoleIpAllowlist: t.exposeStringList('consoleIpAllowlist', { description: 'SVC_CONSOLE_IP_ALLOWLIST; empty: any address.' }),
    idleTimeoutS: t.int({ resolve: (s) => Math.round(s.idleTimeoutMs / 1000) }),
    absoluteTimeoutS: t.int({ resolve: (s) => Math.round(s.absoluteTimeoutMs / 1000) }),
  }),
});

builder.queryField('operators', (t) =>
  t.field({
    type: [OperatorRef],
    authScopes: { action: 'operator_group.list' },
    description: 'Operator key only. Every operator SCIM provisioned (SCIM GET /scim/v2/Users), with groups, roles per project and last sign-in.',
    resolve: (_root, _args, { ctx }) => listOperatorDirectory(ctx),
  }),
);

builder.queryField('signInSettings', (t) =>
  t.field({
    type: SignInSettingsRef,
    authScopes: { action: 'operator_group.list' },
    description: 'Operator key only. The configured sign-in methods (GET /auth/methods) with their non-secret settings and SCIM status.',
    resolve: (_root, _args, { ctx, ports }) => describeSignIn(ctx, ports.operators),
  }),
);
