import type { Prisma, VerticalJob } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import type { WorkError, WorkKind } from '../verticals/work.ts';
import { ASSESSMENT_PROMPT, REPORT_PROMPT } from './prompts.ts';

/** The case and its evidence as the prompts see them (never the bytes: their hashes and descriptions). */
async function caseVariables(db: Db, job: VerticalJob): Promise<Record<string, unknown>> {
  const draft = await db.riskDraft.findFirst({ where: { id: job.subjectId, projectId: job.projectId } });
  const c = draft && (await db.riskCase.findFirst({ where: { id: draft.caseId, projectId: job.projectId } }));
  if (!draft || !c) throw new Error(`risk work ${job.id}: its subject is gone`);
  const evidence = await db.riskEvidence.findMany({
    where: { projectId: job.projectId, caseId: c.id },
    select: { id: true, name: true, sha256: true, description: true },
    orderBy: { id: 'asc' },
    take: 200,
  });
  const vars: Record<string, unknown> = {
    case: { id: c.id, title: c.title, description: c.description, assignee: c.assignee, reviewer: c.reviewer },
    evidence: evidence.map((e) => ({ id: e.id, name: e.name, sha256: e.sha256, description: e.description })),
    instructions: draft.instructions ?? '',
  };
  if (draft.kind === 'report') {
    const latest = await db.riskDraft.findFirst({
      where: { projectId: job.projectId, caseId: c.id, kind: 'assessment', status: 'completed' },
      orderBy: { id: 'desc' },
    });
    vars.assessment = latest?.content ?? 'none yet';
  }
  return vars;
}

async function started(tx: Tx, job: VerticalJob): Promise<void> {
  await tx.riskDraft.updateMany({ where: { id: job.subjectId, status: 'queued' }, data: { status: 'running' } });
}

async function completed(tx: Tx, job: VerticalJob, result: unknown, now: Date): Promise<void> {
  await tx.riskDraft.updateMany({ where: { id: job.subjectId }, data: { status: 'completed', content: result as Prisma.InputJsonValue, error: undefined, completedAt: now } });
}

async function failed(tx: Tx, job: VerticalJob, error: WorkError, now: Date): Promise<void> {
  await tx.riskDraft.updateMany({ where: { id: job.subjectId }, data: { status: 'failed', error: error as unknown as Prisma.InputJsonObject, completedAt: now } });
}

/** The Risk vertical's model work: assessments and reports of a case. */
export const riskWork: WorkKind[] = [
  { kind: 'risk.assessment', prompt: ASSESSMENT_PROMPT, variables: caseVariables, started, completed, failed },
  { kind: 'risk.report', prompt: REPORT_PROMPT, variables: caseVariables, started, completed, failed },
];
