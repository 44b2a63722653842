import type { Tx } from '../../db/client.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { ownTransaction, requireProjectId, type Ctx, type Checked } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import type { ProjectPorts } from '../projects/ports.ts';
import { parseInput } from '../validation.ts';
import { DEFAULT_RETENTION_DAYS, SetPii, SetRetention, type RetentionMode } from './schema.ts';

/** A project's PII default and retention (CONTRACT §11, §12), with the defaults when it never set them. */
export interface PrivacySettings {
  projectId: string;
  piiRedact: boolean;
  piiUpdatedAt: Date | null;
  retentionMode: RetentionMode;
  retentionDays: number;
  retentionUpdatedAt: Date | null;
}

const notFound = () => new SvcError('not_found', { param: 'project_id', message: 'No such project.' });

type Row = { piiRedact: boolean; piiUpdatedAt: Date | null; retentionMode: string; retentionDays: number; retentionUpdatedAt: Date | null } | null;

function settingsOf(projectId: string, row: Row): PrivacySettings {
  return {
    projectId,
    piiRedact: row?.piiRedact ?? false,
    piiUpdatedAt: row?.piiUpdatedAt ?? null,
    retentionMode: (row?.retentionMode as RetentionMode | undefined) ?? 'standard',
    retentionDays: row?.retentionDays ?? DEFAULT_RETENTION_DAYS,
    retentionUpdatedAt: row?.retentionUpdatedAt ?? null,
  };
}

export async function readPrivacySettings(db: Tx, projectId: string): Promise<PrivacySettings | null> {
  const p = await db.project.findUnique({ where: { id: projectId }, select: { id: true, privacy: true } });
  return p ? settingsOf(p.id, p.privacy) : null;
}

export async function getPrivacySettings(ctx: Ctx, projectId: string): Promise<PrivacySettings> {
  const id = await requireProjectId(ctx, projectId);
  const s = await readPrivacySettings(ctx.db, id);
  if (!s) throw notFound();
  return s;
}

/** A project's PII default or retention, about to be set: the project exists. */
async function checkedProject(ctx: Ctx, projectId: string): Promise<string> {
  const id = await requireProjectId(ctx, projectId);
  if (!(await ctx.db.project.findUnique({ where: { id }, select: { id: true } }))) throw notFound();
  return id;
}

export interface PiiChange extends Checked {
  redact: boolean;
}

/** setProjectPii's validation (the input, the project), writing nothing (domain/governance). */
export async function checkProjectPii(_ports: ProjectPorts, ctx: Ctx, projectId: string, input: unknown): Promise<PiiChange> {
  const { redact } = parseInput(SetPii, input);
  return { projectId: await checkedProject(ctx, projectId), redact };
}

/** setProjectPii's change, as checkProjectPii validated it. */
export async function applyProjectPii(ports: ProjectPorts, ctx: Ctx, { projectId: id, redact }: PiiChange, transact = ownTransaction(ctx)): Promise<PrivacySettings> {
  const now = ctx.now();
  const updated = await transact(async (tx) => {
    const before = await readPrivacySettings(tx, id);
    if (!before) throw notFound();
    const row = await tx.projectPrivacy.upsert({
      where: { projectId: id },
      create: { projectId: id, piiRedact: redact, piiUpdatedAt: now },
      update: { piiRedact: redact, piiUpdatedAt: now },
    });
    await recordAudit(tx, ctx, 'pii.update', { projectId: id, targetId: id, data: { redact, previous: before.piiRedact } });
    await enqueueEvent(tx, now, id, 'policy.updated', { policy: 'pii', redact });
    return settingsOf(id, row);
  });
  await ports.projects.invalidate(id);
  return updated;
}

/**
 * PUT /v1/projects/{id}/pii (CONTRACT §11): the project's default for requests that send no `pii` option. Guarded
 * resource `pii` (domain/governance/guarded.ts). Audits pii.update, emits policy.updated {policy: "pii", redact};
 * every replica's project cache is evicted before this returns.
 */
export async function setProjectPii(ports: ProjectPorts, ctx: Ctx, projectId: string, input: unknown): Promise<PrivacySettings> {
  return applyProjectPii(ports, ctx, await checkProjectPii(ports, ctx, projectId, input));
}

export interface RetentionChange extends Checked {
  mode: RetentionMode;
  days: number;
}

/** setProjectRetention's validation (the input, the project), writing nothing (domain/governance). */
export async function checkProjectRetention(_ports: ProjectPorts, ctx: Ctx, projectId: string, input: unknown): Promise<RetentionChange> {
  const parsed = parseInput(SetRetention, input);
  const days = parsed.days ?? DEFAULT_RETENTION_DAYS;
  return { projectId: await checkedProject(ctx, projectId), mode: parsed.mode, days };
}

/** setProjectRetention's change, as checkProjectRetention validated it. */
export async function applyProjectRetention(
  ports: ProjectPorts,
  ctx: Ctx,
  { projectId: id, mode, days }: RetentionChange,
  transact = ownTransaction(ctx),
): Promise<PrivacySettings> {
  const now = ctx.now();
  const updated = await transact(async (tx) => {
    const before = await readPrivacySettings(tx, id);
    if (!before) throw notFound();
    const row = await tx.projectPrivacy.upsert({
      where: { projectId: id },
      create: { projectId: id, retentionMode: mode, retentionDays: days, retentionUpdatedAt: now },
      update: { retentionMode: mode, retentionDays: days, retentionUpdatedAt: now },
    });
    if (mode === 'zero') {
      await tx.retainedInference.updateMany({ where: { projectId: id, sealed: { not: null } }, data: { sealed: null, retainedUntil: null } });
    } else {
      // Each kept record ends at its creation plus the new period, never later than it would have.
      await tx.$executeRaw`UPDATE retained_inferences SET retained_until = LEAST(retained_until, created_at + make_interval(days => ${days}::int))
        WHERE project_id = ${id} AND sealed IS NOT NULL`;
    }
    await recordAudit(tx, ctx, 'retention.update', {
      projectId: id,
      targetId: id,
      data: { mode, days, previous: { mode: before.retentionMode, days: before.retentionDays } },
    });
    await enqueueEvent(tx, now, id, 'policy.updated', { policy: 'retention', mode, days });
    return settingsOf(id, row);
  });
  await ports.projects.invalidate(id);
  return updated;
}

/**
 * PUT /v1/projects/{id}/retention (CONTRACT §12). Guarded resource `retention`. A shorter period applies to what is
 * already kept (the purge reads each record's own end, so the records are cut to the new end here); zero stops
 * keeping content from the next request on, and purges what was kept. Audits retention.update, emits policy.updated
 * {policy: "retention", mode, days}.
 */
export async function setProjectRetention(ports: ProjectPorts, ctx: Ctx, projectId: string, input: unknown): Promise<PrivacySettings> {
  return applyProjectRetention(ports, ctx, await checkProjectRetention(ports, ctx, projectId, input));
}
