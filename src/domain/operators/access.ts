import type { OperatorGroup, OperatorGroupRole } from '../../generated/prisma/client.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { isCidr } from '../../kernel/cidr.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, requirePathProject, type Ctx } from '../context.ts';
import { SetGroupRoles, SetIpAllowlist, checkInput } from './schema.ts';

export type GroupWithRoles = OperatorGroup & { roles: OperatorGroupRole[]; members: { operatorId: string }[] };

const include = { roles: { orderBy: { projectId: 'asc' } }, members: { select: { operatorId: true } } } as const;

/** Which groups reach which projects is the operator key's to decide (the institution, CONTRACT §2). */
function requireOperatorKey(ctx: Ctx): void {
  if (ctx.caller.kind !== 'operator') {
    throw new SvcError('insufficient_scope', { message: "Only the operator key can read or set operator groups' roles." });
  }
}

export async function listOperatorGroups(ctx: Ctx): Promise<GroupWithRoles[]> {
  requireOperatorKey(ctx);
  return ctx.db.operatorGroup.findMany({ orderBy: { id: 'asc' }, include });
}

/**
 * Replaces a group's roles per project (`viewer` reads, `admin` acts). Applies from its members' next request.
 * Audits operator_group.roles_update.
 */
export async function setGroupRoles(ctx: Ctx, groupId: string, body: unknown): Promise<GroupWithRoles> {
  requireOperatorKey(ctx);
  const input = checkInput(SetGroupRoles, body);
  const seen = new Set<string>();
  input.roles.forEach((r, i) => {
    if (seen.has(r.project_id)) throw invalid(`roles[${i}].project_id`, 'Each project may appear once.');
    seen.add(r.project_id);
  });
  const group = await ctx.db.operatorGroup.findUnique({ where: { id: groupId }, select: { id: true } });
  if (!group) throw new SvcError('not_found', { param: 'group_id', message: 'No such operator group.' });
  const projects = new Set(
    (await ctx.db.project.findMany({ where: { id: { in: [...seen] } }, select: { id: true } })).map((p) => p.id),
  );
  const unknown = input.roles.findIndex((r) => !projects.has(r.project_id));
  if (unknown >= 0) throw new SvcError('not_found', { param: `roles[${unknown}].project_id`, message: 'No such project.' });
  await ctx.db.$transaction(async (tx) => {
    await tx.operatorGroupRole.deleteMany({ where: { groupId } });
    await tx.operatorGroupRole.createMany({ data: input.roles.map((r) => ({ groupId, projectId: r.project_id, role: r.role })) });
    await recordAudit(tx, ctx, 'operator_group.roles_update', { projectId: null, targetId: groupId, data: { roles: input.roles } });
  });
  return ctx.db.operatorGroup.findUniqueOrThrow({ where: { id: groupId }, include });
}

export interface ProjectIpAllowlist {
  projectId: string;
  cidrs: string[];
  updatedAt: Date | null;
}

async function existingProject(ctx: Ctx, projectId: string): Promise<void> {
  await requirePathProject(ctx, projectId, 'project_id');
  const found = await ctx.db.project.findUnique({ where: { id: projectId }, select: { id: true } });
  if (!found) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
  addressed(ctx, projectId);
}

export async function getProjectIpAllowlist(ctx: Ctx, projectId: string): Promise<ProjectIpAllowlist> {
  await existingProject(ctx, projectId);
  const row = await ctx.db.projectIpAllowlist.findUnique({ where: { projectId } });
  return { projectId, cidrs: row?.cidrs ?? [], updatedAt: row?.updatedAt ?? null };
}

/**
 * The project's console IP allowlist (CONTRACT §17): console sessions addressing the project from elsewhere are
 * refused (403, audited). Empty: any address. Audits ip_allowlist.update.
 */
export async function setProjectIpAllowlist(ctx: Ctx, projectId: string, body: unknown): Promise<ProjectIpAllowlist> {
  const input = checkInput(SetIpAllowlist, body);
  const bad = input.cidrs.findIndex((c) => !isCidr(c));
  if (bad >= 0) throw invalid(`cidrs[${bad}]`, `"${input.cidrs[bad]}" is not an IP address or CIDR.`);
  await existingProject(ctx, projectId);
  const cidrs = [...new Set(input.cidrs.map((c) => c.trim()))];
  const now = ctx.now();
  const row = await ctx.db.$transaction(async (tx) => {
    const saved = await tx.projectIpAllowlist.upsert({
      where: { projectId },
      create: { projectId, cidrs, updatedAt: now },
      update: { cidrs, updatedAt: now },
    });
    await recordAudit(tx, ctx, 'ip_allowlist.update', { projectId, targetId: projectId, data: { cidrs } });
    return saved;
  });
  return { projectId, cidrs: row.cidrs, updatedAt: row.updatedAt };
}
