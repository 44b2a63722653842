import type { Operator } from '../../generated/prisma/client.ts';
import { SvcError } from '../../errors/svc-error.ts';
import type { Ctx } from '../context.ts';
import type { OperatorPorts, SignInSettings } from './ports.ts';
import { strongest, type Role } from './roles.ts';

/**
 * The console's Operators screen (issue 42), read-only: who SCIM provisioned, in which groups, with which role per
 * project, and when each last signed in; and the sign-in configuration, never a secret. The operator key's alone, as
 * the groups' roles are (access.ts): the people and the institution's identity provider are not a project's.
 */

export interface DirectoryEntry {
  operator: Operator;
  groups: { id: string; displayName: string }[];
  /** Per project, the strongest role of the operator's groups (what its next request gets). */
  roles: { projectId: string; role: Role }[];
  /** The newest operator.sign_in audit row of the operator, if the audit log still holds one. */
  lastSignIn: { at: Date; method: string | null } | null;
}

function requireOperatorKey(ctx: Ctx): void {
  if (ctx.caller.kind !== 'operator') {
    throw new SvcError('insufficient_scope', { message: 'Only the operator key can read the operators and the sign-in settings.' });
  }
}

/** Every operator SCIM provisioned (active or not), by id, with its groups, roles and last sign-in: three queries. */
export async function listOperatorDirectory(ctx: Ctx): Promise<DirectoryEntry[]> {
  requireOperatorKey(ctx);
  const operators = await ctx.db.operator.findMany({
    orderBy: { id: 'asc' },
    include: {
      memberships: {
        orderBy: { groupId: 'asc' },
        select: { group: { select: { id: true, displayName: true, roles: { select: { projectId: true, role: true } } } } },
      },
    },
  });
  if (operators.length === 0) return [];
  const ids = operators.map((o) => o.id);
  // Sign-ins are audited with no project (audit.ts): the (project_id, action, id) index finds them.
  const where = { projectId: null, action: 'operator.sign_in', actorKeyId: { in: ids } };
  const newest = await ctx.db.auditEvent.groupBy({ by: ['actorKeyId'], where, _max: { createdAt: true } });
  const pairs = newest.filter((n) => n.actorKeyId && n._max.createdAt).map((n) => ({ actorKeyId: n.actorKeyId!, createdAt: n._max.createdAt! }));
  const rows = pairs.length === 0 ? [] : await ctx.db.auditEvent.findMany({ where: { ...where, OR: pairs }, select: { actorKeyId: true, createdAt: true, data: true } });
  const last = new Map<string, { at: Date; method: string | null }>();
  for (const r of rows) {
    const method = (r.data as { method?: unknown } | null)?.method;
    last.set(r.actorKeyId!, { at: r.createdAt, method: typeof method === 'string' ? method : null });
  }
  return operators.map(({ memberships, ...operator }) => {
    const roles = new Map<string, Role>();
    for (const m of memberships) for (const r of m.group.roles) roles.set(r.projectId, strongest(roles.get(r.projectId), r.role as Role));
    return {
      operator,
      groups: memberships.map((m) => ({ id: m.group.id, displayName: m.group.displayName })),
      roles: [...roles].sort(([a], [b]) => a.localeCompare(b)).map(([projectId, role]) => ({ projectId, role })),
      lastSignIn: last.get(operator.id) ?? null,
    };
  });
}

/** The sign-in settings as configured (SVC_OIDC_*, SVC_SAML_*, SVC_SCIM_TOKEN, the timeouts, SVC_CONSOLE_IP_ALLOWLIST). */
export function describeSignIn(ctx: Ctx, ports: OperatorPorts): SignInSettings & { idleTimeoutMs: number; absoluteTimeoutMs: number } {
  requireOperatorKey(ctx);
  const signIn = ports.signIn ?? { oidc: null, saml: null, scim: null, consoleIpAllowlist: [] };
  return { ...signIn, idleTimeoutMs: ports.settings.idleTimeoutMs, absoluteTimeoutMs: ports.settings.absoluteTimeoutMs };
}

/** The configuration's parts that are not secret (the composition root passes its Config's operators section). */
export function signInSettingsOf(
  config: {
    oidc: { issuer: string; clientId: string; usernameClaim: string; scopes: string } | null;
    saml: { entryPoint: string; entityId: string } | null;
    scimTokenHash: string | null;
    consoleAllowlist: string[];
  },
  publicUrl: string | null,
): SignInSettings {
  const base = publicUrl ?? '';
  return {
    oidc: config.oidc
      ? { issuer: config.oidc.issuer, clientId: config.oidc.clientId, usernameClaim: config.oidc.usernameClaim, scopes: config.oidc.scopes, redirectUri: `${base}/auth/oidc/callback` }
      : null,
    saml: config.saml
      ? { entryPoint: config.saml.entryPoint, entityId: config.saml.entityId, acsUrl: `${base}/auth/saml/acs`, metadataUrl: `${base}/auth/saml/metadata` }
      : null,
    scim: config.scimTokenHash !== null ? { baseUrl: `${base}/scim/v2` } : null,
    consoleIpAllowlist: [...config.consoleAllowlist],
  };
}
