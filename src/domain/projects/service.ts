import type { Project } from '../../generated/prisma/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, assertPathProject, requirePathProject, type Ctx } from '../context.ts';
import type { ProjectPorts } from './ports.ts';
import { paginate, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import { CreateProject, ListProjectsQuery } from './schema.ts';

const notFound = (param = 'project_id') => new SvcError('not_found', { param, message: 'No such project.' });

function requireOperator(ctx: Ctx): void {
  if (ctx.caller.kind !== 'operator') {
    throw new SvcError('insufficient_scope', { message: 'Only the operator key can create or archive projects.' });
  }
}

/** Operator only. Audits project.create. */
export async function createProject(ctx: Ctx, raw: unknown): Promise<Project> {
  // Input first, as the REST route's schema checks it before any service runs: both surfaces answer alike.
  const input = parseInput(CreateProject, raw);
  requireOperator(ctx);
  const valid = { name: input.name, plan: input.plan ?? 'starter', region: input.region ?? null };
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const project = await tx.project.create({
      data: { id: newId('prj', now.getTime()), ...valid, status: 'active', createdAt: now },
    });
    await recordAudit(tx, ctx, 'project.create', { projectId: project.id, targetId: project.id, data: valid });
    addressed(ctx, project.id);
    return project;
  });
}

export async function listProjects(ctx: Ctx, raw: unknown): Promise<Page<Project>> {
  const query = parseInput(ListProjectsQuery, raw);
  // A console session (issue 22) lists the projects its operator's groups reach.
  const where =
    ctx.caller.kind === 'key'
      ? { id: ctx.caller.projectId! }
      : ctx.caller.kind === 'session'
        ? { id: { in: [...(ctx.caller.session?.projects.keys() ?? [])] } }
        : {};
  return paginate(query, {
    cursorField: 'id',
    fetch: ({ cursor, order, take }) =>
      ctx.db.project.findMany({
        where: cursor ? { AND: [where, { id: cursor }] } : where,
        orderBy: { id: order },
        take,
      }),
    exists: async (id) => (await ctx.db.project.count({ where: { AND: [where, { id }] } })) > 0,
  });
}

export async function getProject(ctx: Ctx, projectId: string): Promise<Project> {
  // A key sees only its own project; the path's `{id}` (CONTRACT §2) is the param named for it.
  await requirePathProject(ctx, projectId);
  const project = await ctx.db.project.findUnique({ where: { id: projectId } });
  if (!project) throw notFound('id');
  addressed(ctx, project.id);
  return project;
}

/**
 * Operator only. Archiving twice returns the same project; audits project.archive on the first call only. Inference
 * on the project is refused (project_archived) from the moment this returns, on every replica.
 */
export async function archiveProject(ports: ProjectPorts, ctx: Ctx, projectId: string): Promise<Project> {
  requireOperator(ctx);
  assertPathProject(ctx, projectId);
  const archived = await ctx.db.$transaction(async (tx) => {
    const project = await tx.project.findUnique({ where: { id: projectId } });
    if (!project) throw notFound('id');
    addressed(ctx, project.id);
    if (project.status === 'archived') return project;
    const updated = await tx.project.update({
      where: { id: projectId },
      data: { status: 'archived', archivedAt: ctx.now() },
    });
    await recordAudit(tx, ctx, 'project.archive', { projectId, targetId: projectId });
    return updated;
  });
  // After commit, before answering: a replica that reloads the project must already read the archived row.
  await ports.projects.invalidate(archived.id);
  return archived;
}
