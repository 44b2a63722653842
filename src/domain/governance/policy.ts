import { SvcError } from '../../errors/svc-error.ts';
import { GUARDED_RESOURCES, type GuardedResource } from '../auth/actions.ts';
import { recordAudit } from '../audit/service.ts';
import { ownTransaction, requireProjectId, type Ctx, type Checked } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import type { ProjectPorts } from '../projects/ports.ts';
import { parseInput } from '../validation.ts';
import { SetGovernance, SetResidency } from './schema.ts';

const notFound = () => new SvcError('not_found', { param: 'project_id', message: 'No such project.' });

export interface GovernancePolicy {
  projectId: string;
  dualControl: GuardedResource[];
  /** null while the project has never set its policy. */
  updatedAt: Date | null;
}

/** In GUARDED_RESOURCES's order, each once: the stored list does not depend on how the caller spelled it. */
function dualControlOf(input: unknown): GuardedResource[] {
  const list = parseInput(SetGovernance, input).dual_control;
  return GUARDED_RESOURCES.filter((r) => list.includes(r));
}

export async function getGovernancePolicy(ctx: Ctx, projectId: string): Promise<GovernancePolicy> {
  const id = await requireProjectId(ctx, projectId);
  const row = await ctx.db.project.findUnique({ where: { id }, select: { dualControl: true, governanceUpdatedAt: true } });
  if (!row) throw notFound();
  return { projectId: id, dualControl: row.dualControl as GuardedResource[], updatedAt: row.governanceUpdatedAt };
}

/** The project a policy is about to be set on exists. */
async function checkedProject(ctx: Ctx, projectId: string): Promise<string> {
  const id = await requireProjectId(ctx, projectId);
  if (!(await ctx.db.project.findUnique({ where: { id }, select: { id: true } }))) throw notFound();
  return id;
}

export interface GovernanceChange extends Checked {
  dualControl: GuardedResource[];
}

/** setGovernancePolicy's validation (the list, the project), writing nothing. */
export async function checkGovernancePolicy(ctx: Ctx, projectId: string, input: unknown): Promise<GovernanceChange> {
  const dualControl = dualControlOf(input);
  return { projectId: await checkedProject(ctx, projectId), dualControl };
}

/** setGovernancePolicy's change, as checkGovernancePolicy validated it. */
export async function applyGovernancePolicy(ctx: Ctx, { projectId: id, dualControl }: GovernanceChange, transact = ownTransaction(ctx)): Promise<GovernancePolicy> {
  const now = ctx.now();
  return transact(async (tx) => {
    const before = await tx.project.findUnique({ where: { id }, select: { dualControl: true } });
    if (!before) throw notFound();
    await tx.project.update({ where: { id }, data: { dualControl, governanceUpdatedAt: now } });
    await recordAudit(tx, ctx, 'governance.update', { projectId: id, targetId: id, data: { dual_control: dualControl, previous: before.dualControl } });
    await enqueueEvent(tx, now, id, 'policy.updated', { policy: 'governance', dual_control: dualControl });
    return { projectId: id, dualControl, updatedAt: now };
  });
}

/**
 * Sets the project's dual control list (CONTRACT §15). Once it is non-empty, this change is itself guarded
 * (guarded.ts). Audits governance.update and emits policy.updated {policy: "governance", dual_control}.
 */
export async function setGovernancePolicy(ctx: Ctx, projectId: string, input: unknown): Promise<GovernancePolicy> {
  return applyGovernancePolicy(ctx, await checkGovernancePolicy(ctx, projectId, input));
}

export interface Residency {
  projectId: string;
  region: string | null;
}

export interface ResidencyChange extends Checked {
  region: string | null;
}

/** setResidency's validation (the region, the project), writing nothing. */
export async function checkResidency(_ports: ProjectPorts, ctx: Ctx, projectId: string, input: unknown): Promise<ResidencyChange> {
  const { region } = parseInput(SetResidency, input);
  return { projectId: await checkedProject(ctx, projectId), region };
}

/** setResidency's change, as checkResidency validated it. */
export async function applyResidency(ports: ProjectPorts, ctx: Ctx, { projectId: id, region }: ResidencyChange, transact = ownTransaction(ctx)): Promise<Residency> {
  const now = ctx.now();
  const updated = await transact(async (tx) => {
    const before = await tx.project.findUnique({ where: { id }, select: { region: true } });
    if (!before) throw notFound();
    await tx.project.update({ where: { id }, data: { region } });
    await recordAudit(tx, ctx, 'residency.update', { projectId: id, targetId: id, data: { region, previous: before.region } });
    await enqueueEvent(tx, now, id, 'policy.updated', { policy: 'residency', region });
    return { projectId: id, region };
  });
  // After commit: a replica that reloads the project must already read the new pin.
  await ports.projects.invalidate(id);
  return updated;
}

/**
 * Pins the project to a region (or unpins it with null): inference then routes only to providers of that region and
 * refuses a request naming another (residency_violation). Audits residency.update and emits policy.updated
 * {policy: "residency", region}; every replica's project cache is evicted before this returns.
 */
export async function setResidency(ports: ProjectPorts, ctx: Ctx, projectId: string, input: unknown): Promise<Residency> {
  return applyResidency(ports, ctx, await checkResidency(ports, ctx, projectId, input));
}
