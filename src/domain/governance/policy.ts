import { SvcError, invalid } from '../../errors/svc-error.ts';
import { GUARDED_RESOURCES, type GuardedResource } from '../auth/actions.ts';
import { recordAudit } from '../audit/service.ts';
import type { Ctx } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import type { ProjectPorts } from '../projects/ports.ts';
import { requireProjectId } from '../tenancy.ts';

const notFound = () => new SvcError('not_found', { param: 'project_id', message: 'No such project.' });

export interface GovernancePolicy {
  projectId: string;
  dualControl: GuardedResource[];
  /** null while the project has never set its policy. */
  updatedAt: Date | null;
}

export interface SetGovernanceInput {
  project_id?: unknown;
  dual_control?: unknown;
}

/** In GUARDED_RESOURCES's order, each once: the stored list does not depend on how the caller spelled it. */
export function validateDualControl(input: SetGovernanceInput): GuardedResource[] {
  const list = input.dual_control;
  if (list === undefined || list === null) throw invalid('dual_control', 'Missing required parameter: dual_control.');
  if (!Array.isArray(list)) throw invalid('dual_control', 'dual_control must be an array of resource names.');
  list.forEach((item, i) => {
    if (typeof item !== 'string' || !(GUARDED_RESOURCES as readonly string[]).includes(item)) {
      throw invalid(`dual_control[${i}]`, `dual_control[${i}] must be one of ${GUARDED_RESOURCES.join(', ')}.`);
    }
  });
  return GUARDED_RESOURCES.filter((r) => list.includes(r));
}

export async function getGovernancePolicy(ctx: Ctx, projectId: string): Promise<GovernancePolicy> {
  const id = await requireProjectId(ctx, projectId);
  const row = await ctx.db.project.findUnique({ where: { id }, select: { dualControl: true, governanceUpdatedAt: true } });
  if (!row) throw notFound();
  return { projectId: id, dualControl: row.dualControl as GuardedResource[], updatedAt: row.governanceUpdatedAt };
}

/**
 * Sets the project's dual control list (CONTRACT §15). Once it is non-empty, this change is itself guarded
 * (guarded.ts). Audits governance.update and emits policy.updated {policy: "governance", dual_control}.
 */
export async function setGovernancePolicy(ctx: Ctx, projectId: string, input: SetGovernanceInput): Promise<GovernancePolicy> {
  const dualControl = validateDualControl(input);
  const id = await requireProjectId(ctx, projectId);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const before = await tx.project.findUnique({ where: { id }, select: { dualControl: true } });
    if (!before) throw notFound();
    await tx.project.update({ where: { id }, data: { dualControl, governanceUpdatedAt: now } });
    await recordAudit(tx, ctx, 'governance.update', { projectId: id, targetId: id, data: { dual_control: dualControl, previous: before.dualControl } });
    await enqueueEvent(tx, now, id, 'policy.updated', { policy: 'governance', dual_control: dualControl });
    return { projectId: id, dualControl, updatedAt: now };
  });
}

export interface Residency {
  projectId: string;
  region: string | null;
}

export interface SetResidencyInput {
  project_id?: unknown;
  region?: unknown;
}

// The project's region as POST /v1/projects takes it (projects/service.ts validateProjectInput).
const REGION_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;

export function validateRegion(input: SetResidencyInput): string | null {
  if (!input || !('region' in input) || input.region === undefined) throw invalid('region', 'Missing required parameter: region (a region, or null to unpin).');
  const region = input.region;
  if (region === null) return null;
  if (typeof region !== 'string' || !REGION_RE.test(region)) throw invalid('region', 'region must be a lower-case region name such as eu-west-1, or null.');
  return region;
}

/**
 * Pins the project to a region (or unpins it with null): inference then routes only to providers of that region and
 * refuses a request naming another (residency_violation). Audits residency.update and emits policy.updated
 * {policy: "residency", region}; every replica's project cache is evicted before this returns.
 */
export async function setResidency(ports: ProjectPorts, ctx: Ctx, projectId: string, input: SetResidencyInput): Promise<Residency> {
  const region = validateRegion(input);
  const id = await requireProjectId(ctx, projectId);
  const now = ctx.now();
  const updated = await ctx.db.$transaction(async (tx) => {
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
