import type { OpsDraft, Prisma, VerticalJob } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import type { WorkError, WorkKind } from '../verticals/work.ts';
import { lineText, logFilter, PROMPT_LINES } from './logs.ts';
import { LOG_SUMMARY_PROMPT, POSTMORTEM_PROMPT } from './prompts.ts';

async function subject(db: Db, job: VerticalJob): Promise<OpsDraft> {
  const draft = await db.opsDraft.findFirst({ where: { id: job.subjectId, projectId: job.projectId } });
  if (!draft) throw new Error(`ops work ${job.id}: its subject is gone`);
  return draft;
}

async function logSummaryVariables(db: Db, job: VerticalJob): Promise<Record<string, unknown>> {
  const draft = await subject(db, job);
  const p = draft.params as { from: number; to: number; query: string };
  const from = new Date(p.from * 1000);
  const to = new Date(p.to * 1000);
  const lines = await db.opsLogEntry.findMany({ where: logFilter(job.projectId, from, to, p.query), orderBy: { timestamp: 'desc' }, take: PROMPT_LINES });
  return { query: p.query || '(all lines)', window: `${from.toISOString()} to ${to.toISOString()}`, matched: draft.matched, lines: lines.map(lineText).join('\n') };
}

/** The incident, its timeline and the lines of its service from an hour before it opened until it closed (or now). */
async function postmortemVariables(db: Db, job: VerticalJob): Promise<Record<string, unknown>> {
  const draft = await subject(db, job);
  const incident = await db.opsIncident.findFirst({ where: { id: draft.incidentId!, projectId: job.projectId } });
  if (!incident) throw new Error(`ops work ${job.id}: its incident is gone`);
  const timeline = await db.opsTimelineEntry.findMany({ where: { projectId: job.projectId, incidentId: incident.id }, orderBy: { id: 'asc' }, take: 500 });
  const from = new Date(incident.openedAt.getTime() - 3_600_000);
  const to = incident.closedAt ?? job.createdAt;
  const where: Prisma.OpsLogEntryWhereInput = { projectId: job.projectId, timestamp: { gte: from, lte: to }, ...(incident.service ? { service: incident.service } : {}) };
  const lines = await db.opsLogEntry.findMany({ where, orderBy: { timestamp: 'desc' }, take: PROMPT_LINES });
  return {
    incident: { id: incident.id, title: incident.title, severity: incident.severity, service: incident.service, status: incident.status, resolution: incident.resolution, opened_at: incident.openedAt.toISOString(), closed_at: incident.closedAt?.toISOString() ?? null },
    timeline: timeline.map((e) => `${e.at.toISOString()} ${e.kind}: ${e.message}`).join('\n'),
    lines: lines.map(lineText).join('\n'),
    instructions: (draft.params as { instructions?: string }).instructions ?? '',
  };
}

async function started(tx: Tx, job: VerticalJob): Promise<void> {
  await tx.opsDraft.updateMany({ where: { id: job.subjectId, status: 'queued' }, data: { status: 'running' } });
}

async function completed(tx: Tx, job: VerticalJob, result: unknown, now: Date): Promise<void> {
  await tx.opsDraft.updateMany({ where: { id: job.subjectId }, data: { status: 'completed', content: result as Prisma.InputJsonValue, completedAt: now } });
}

async function failed(tx: Tx, job: VerticalJob, error: WorkError, now: Date): Promise<void> {
  await tx.opsDraft.updateMany({ where: { id: job.subjectId }, data: { status: 'failed', error: error as unknown as Prisma.InputJsonObject, completedAt: now } });
}

/** The Ops vertical's model work: log query summaries and post-mortems. */
export const opsWork: WorkKind[] = [
  { kind: 'ops.log_summary', prompt: LOG_SUMMARY_PROMPT, variables: logSummaryVariables, started, completed, failed },
  { kind: 'ops.postmortem', prompt: POSTMORTEM_PROMPT, variables: postmortemVariables, started, completed, failed },
];
