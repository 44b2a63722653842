import type { OpsConnector, OpsDraft, OpsIncident, OpsLogEntry, OpsSlo, OpsTimelineEntry, Prisma } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, visibleProjectId, type Ctx } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { pageById, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import { assertMayRunModelWork, notFound, readProject, writeProject } from '../verticals/access.ts';
import { enqueueWork } from '../verticals/work.ts';
import { logFilter } from './logs.ts';
import {
  AddTimelineEntry,
  CloseIncident,
  CreateConnector,
  CreateSlo,
  DraftPostmortem,
  IngestLogs,
  ListIncidentsQuery,
  ListPostmortemsQuery,
  ListQuery,
  ListTimelineQuery,
  OpenIncident,
  QueryLogs,
  ScanConnector,
  UpdateConnector,
} from './schema.ts';

const HOUR_S = 3600;
/** CONTRACT §16: the longest log query window per plan (enterprise until set: its own figure). */
export const QUERY_WINDOW_CAP_S: Record<string, number> = { starter: 24 * HOUR_S, growth: 7 * 24 * HOUR_S, enterprise: 30 * 24 * HOUR_S };
/** How many matching lines a query answer shows (the summary reads up to PROMPT_LINES). */
export const QUERY_ANSWER_LINES = 100;

const only = <W extends object>(projectId: string | undefined, extra: W): W & { projectId?: string } => ({
  ...(projectId !== undefined ? { projectId } : {}),
  ...extra,
});

// ---- incidents and their timeline ----

async function addEntry(tx: Tx, ctx: Ctx, incident: { id: string; projectId: string }, kind: string, message: string): Promise<OpsTimelineEntry> {
  const now = ctx.now();
  return tx.opsTimelineEntry.create({
    data: { id: newId('tle', now.getTime()), projectId: incident.projectId, incidentId: incident.id, kind, message, actor: ctx.caller.keyId, at: now },
  });
}

/** Audits ops_incident.create, emits ops.incident.opened, and starts the timeline. */
export async function openIncident(ctx: Ctx, raw: unknown): Promise<OpsIncident> {
  const input = parseInput(OpenIncident, raw);
  const projectId = await writeProject(ctx, input.project_id);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.opsIncident.create({
      data: { id: newId('inc', now.getTime()), projectId, title: input.title, severity: input.severity, service: input.service ?? null, openedAt: now, createdAt: now, updatedAt: now },
    });
    await addEntry(tx, ctx, row, 'opened', input.summary ?? `Opened (${row.severity}): ${row.title}`);
    await recordAudit(tx, ctx, 'ops_incident.create', { projectId, targetId: row.id, data: { title: row.title, severity: row.severity } });
    await enqueueEvent(tx, now, projectId, 'ops.incident.opened', { incident_id: row.id, title: row.title, severity: row.severity, service: row.service });
    return row;
  });
}

export async function listIncidents(ctx: Ctx, raw: unknown): Promise<Page<OpsIncident>> {
  const query = parseInput(ListIncidentsQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  return pageById(query, ctx.db.opsIncident, only(projectId, query.status ? { status: query.status } : {}));
}

export async function getIncident(ctx: Ctx, incidentId: string): Promise<OpsIncident> {
  const row = await ctx.db.opsIncident.findFirst({ where: only(await readProject(ctx), { id: incidentId }) });
  if (!row) throw notFound('incident_id', 'incident');
  addressed(ctx, row.projectId);
  return row;
}

/** Closing a closed incident returns it unchanged. Audits ops_incident.close and emits ops.incident.closed, once. */
export async function closeIncident(ctx: Ctx, incidentId: string, raw: unknown): Promise<OpsIncident> {
  const input = parseInput(CloseIncident, raw ?? {});
  const found = await getIncident(ctx, incidentId);
  if (found.status === 'closed') return found;
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const { count } = await tx.opsIncident.updateMany({
      where: { id: found.id, status: 'open' },
      data: { status: 'closed', resolution: input.resolution ?? null, closedAt: now, updatedAt: now },
    });
    const row = (await tx.opsIncident.findUnique({ where: { id: found.id } }))!;
    if (count === 0) return row;
    await addEntry(tx, ctx, row, 'closed', input.resolution ?? 'Closed.');
    await recordAudit(tx, ctx, 'ops_incident.close', { projectId: row.projectId, targetId: row.id, data: { resolution: row.resolution } });
    await enqueueEvent(tx, now, row.projectId, 'ops.incident.closed', {
      incident_id: row.id,
      title: row.title,
      severity: row.severity,
      resolution: row.resolution,
      duration_s: Math.round((now.getTime() - row.openedAt.getTime()) / 1000),
    });
    return row;
  });
}

/** Audits ops_timeline.create. */
export async function addTimelineEntry(ctx: Ctx, incidentId: string, raw: unknown): Promise<OpsTimelineEntry> {
  const input = parseInput(AddTimelineEntry, raw);
  const incident = await getIncident(ctx, incidentId);
  return ctx.db.$transaction(async (tx) => {
    const entry = await addEntry(tx, ctx, incident, 'note', input.message);
    await recordAudit(tx, ctx, 'ops_timeline.create', { projectId: incident.projectId, targetId: entry.id, data: { incident_id: incident.id } });
    return entry;
  });
}

/** The timeline, newest first like every list. */
export async function listTimeline(ctx: Ctx, incidentId: string, raw: unknown): Promise<Page<OpsTimelineEntry>> {
  const query = parseInput(ListTimelineQuery, raw ?? {});
  const incident = await getIncident(ctx, incidentId);
  return pageById(query, ctx.db.opsTimelineEntry, { projectId: incident.projectId, incidentId: incident.id });
}

// ---- logs ----

type EntryInput = IngestLogs['entries'][number];

export interface IngestResult {
  projectId: string;
  ingested: number;
  /** The SLOs whose burn rate crossed their threshold with these lines (ops.slo.burn emitted for each). */
  burning: string[];
}

/** Inserts lines and evaluates the project's SLOs of their services, in the caller's transaction. */
async function ingest(tx: Tx, ctx: Ctx, projectId: string, entries: EntryInput[], connectorId: string | null): Promise<IngestResult> {
  const now = ctx.now();
  await tx.opsLogEntry.createMany({
    data: entries.map((e) => ({
      id: newId('log', now.getTime()),
      projectId,
      timestamp: e.timestamp !== undefined ? new Date(e.timestamp * 1000) : now,
      level: e.level,
      service: e.service,
      message: e.message,
      attributes: (e.attributes ?? {}) as Prisma.InputJsonObject,
      connectorId,
      createdAt: now,
    })),
  });
  const services = [...new Set(entries.map((e) => e.service))];
  const slos = await tx.opsSlo.findMany({ where: { projectId, service: { in: services } }, orderBy: { id: 'asc' } });
  const burning: string[] = [];
  for (const slo of slos) if (await evaluateSlo(tx, slo, now)) burning.push(slo.id);
  return { projectId, ingested: entries.length, burning };
}

/** Audits ops_logs.ingest (how many, never the lines). */
export async function ingestLogs(ctx: Ctx, raw: unknown): Promise<IngestResult> {
  const input = parseInput(IngestLogs, raw);
  const projectId = await writeProject(ctx, input.project_id);
  return ctx.db.$transaction(async (tx) => {
    const result = await ingest(tx, ctx, projectId, input.entries, null);
    await recordAudit(tx, ctx, 'ops_logs.ingest', { projectId, data: { ingested: result.ingested, slo_burns: result.burning } });
    return result;
  });
}

export interface LogQueryAnswer {
  query: OpsDraft;
  lines: OpsLogEntry[];
}

/**
 * The lines of a window matching the query, now, and a model summary of them, queued (the log query object's status
 * and summary; GET /v1/ops/logs/queries/{id}). A window over the plan's cap is 409 query_window_too_large.
 * Audits ops_logs.query.
 */
export async function queryLogs(ctx: Ctx, raw: unknown): Promise<LogQueryAnswer> {
  const input = parseInput(QueryLogs, raw);
  if (input.to < input.from) throw invalid('to', 'to must not be before from.');
  assertMayRunModelWork(ctx);
  const projectId = await writeProject(ctx, input.project_id);
  const project = await ctx.db.project.findUnique({ where: { id: projectId }, select: { plan: true } });
  const cap = QUERY_WINDOW_CAP_S[project?.plan ?? 'starter'] ?? QUERY_WINDOW_CAP_S.starter!;
  if (input.to - input.from > cap) {
    throw new SvcError('query_window_too_large', {
      param: 'to',
      message: `The window is ${input.to - input.from} s; the ${project?.plan ?? 'starter'} plan allows at most ${cap} s (${cap / HOUR_S} h).`,
    });
  }
  const where = logFilter(projectId, new Date(input.from * 1000), new Date(input.to * 1000), input.query);
  const matched = await ctx.db.opsLogEntry.count({ where });
  const lines = await ctx.db.opsLogEntry.findMany({ where, orderBy: { timestamp: 'desc' }, take: QUERY_ANSWER_LINES });
  const now = ctx.now();
  const query = await ctx.db.$transaction(async (tx) => {
    const id = newId('lgq', now.getTime());
    const jobId = await enqueueWork(tx, ctx, { projectId, kind: 'ops.log_summary', subjectId: id });
    const row = await tx.opsDraft.create({
      data: { id, projectId, kind: 'log_query', params: { from: input.from, to: input.to, query: input.query }, matched, status: 'queued', jobId, createdAt: now },
    });
    await recordAudit(tx, ctx, 'ops_logs.query', { projectId, targetId: id, data: { from: input.from, to: input.to, query: input.query, matched } });
    return row;
  });
  return { query, lines };
}

// ---- model work: log query summaries and post-mortems ----

export type OpsDraftKind = 'log_query' | 'postmortem';
const DRAFT_PARAM = { log_query: 'query_id', postmortem: 'postmortem_id' } as const;

export async function getOpsDraft(ctx: Ctx, kind: OpsDraftKind, id: string): Promise<OpsDraft> {
  const row = await ctx.db.opsDraft.findFirst({ where: only(await readProject(ctx), { id, kind }) });
  if (!row) throw notFound(DRAFT_PARAM[kind], kind === 'log_query' ? 'log query' : 'post-mortem');
  addressed(ctx, row.projectId);
  return row;
}

/** Queues a post-mortem drafted from the incident's timeline and log lines. Audits ops_postmortem.create. */
export async function draftPostmortem(ctx: Ctx, incidentId: string, raw: unknown): Promise<OpsDraft> {
  const input = parseInput(DraftPostmortem, raw ?? {});
  assertMayRunModelWork(ctx);
  const incident = await getIncident(ctx, incidentId);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const id = newId('pmt', now.getTime());
    const jobId = await enqueueWork(tx, ctx, { projectId: incident.projectId, kind: 'ops.postmortem', subjectId: id });
    const row = await tx.opsDraft.create({
      data: { id, projectId: incident.projectId, kind: 'postmortem', incidentId: incident.id, params: input.instructions ? { instructions: input.instructions } : {}, status: 'queued', jobId, createdAt: now },
    });
    await recordAudit(tx, ctx, 'ops_postmortem.create', { projectId: incident.projectId, targetId: id, data: { incident_id: incident.id, job_id: jobId } });
    return row;
  });
}

export async function listPostmortems(ctx: Ctx, raw: unknown): Promise<Page<OpsDraft>> {
  const query = parseInput(ListPostmortemsQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  return pageById(query, ctx.db.opsDraft, only(projectId, { kind: 'postmortem', ...(query.incident_id ? { incidentId: query.incident_id } : {}) }));
}

// ---- connectors ----

/** Audits ops_connector.create. */
export async function createConnector(ctx: Ctx, raw: unknown): Promise<OpsConnector> {
  const input = parseInput(CreateConnector, raw);
  const projectId = await writeProject(ctx, input.project_id);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.opsConnector.create({
      data: { id: newId('con', now.getTime()), projectId, name: input.name, kind: input.kind, enabled: input.enabled ?? true, createdAt: now, updatedAt: now },
    });
    await recordAudit(tx, ctx, 'ops_connector.create', { projectId, targetId: row.id, data: { name: row.name, kind: row.kind, enabled: row.enabled } });
    return row;
  });
}

export async function listConnectors(ctx: Ctx, raw: unknown): Promise<Page<OpsConnector>> {
  const query = parseInput(ListQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  return pageById(query, ctx.db.opsConnector, only(projectId, {}));
}

export async function getConnector(ctx: Ctx, connectorId: string): Promise<OpsConnector> {
  const row = await ctx.db.opsConnector.findFirst({ where: only(await readProject(ctx), { id: connectorId }) });
  if (!row) throw notFound('connector_id', 'connector');
  addressed(ctx, row.projectId);
  return row;
}

/** Audits ops_connector.update. */
export async function updateConnector(ctx: Ctx, connectorId: string, raw: unknown): Promise<OpsConnector> {
  const input = parseInput(UpdateConnector, raw);
  const found = await getConnector(ctx, connectorId);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const row = await tx.opsConnector.update({
      where: { id: found.id },
      data: { ...(input.name !== undefined ? { name: input.name } : {}), ...(input.enabled !== undefined ? { enabled: input.enabled } : {}), updatedAt: now },
    });
    const { project_id: _p, ...changes } = input;
    await recordAudit(tx, ctx, 'ops_connector.update', { projectId: row.projectId, targetId: row.id, data: changes });
    return row;
  });
}

export interface ScanResult extends IngestResult {
  connector: OpsConnector;
  scannedAt: Date;
}

/** A scan of a disabled connector is 403 connector_disabled. Ingests what it collected; audits ops_connector.scan. */
export async function scanConnector(ctx: Ctx, connectorId: string, raw: unknown): Promise<ScanResult> {
  const input = parseInput(ScanConnector, raw ?? {});
  const found = await getConnector(ctx, connectorId);
  if (!found.enabled) {
    throw new SvcError('connector_disabled', { param: 'connector_id', message: `The connector ${found.id} is disabled: enable it (PATCH enabled: true) to scan.` });
  }
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const result = input.entries ? await ingest(tx, ctx, found.projectId, input.entries, found.id) : { projectId: found.projectId, ingested: 0, burning: [] };
    const connector = await tx.opsConnector.update({ where: { id: found.id }, data: { lastScanAt: now, updatedAt: now } });
    await recordAudit(tx, ctx, 'ops_connector.scan', { projectId: found.projectId, targetId: found.id, data: { ingested: result.ingested, slo_burns: result.burning } });
    return { ...result, connector, scannedAt: now };
  });
}

// ---- SLOs ----

export interface SloStatus {
  slo: OpsSlo;
  total: number;
  bad: number;
  /** bad / total over the window (0 without lines). */
  errorRate: number;
  /** 1 - objective: the share of bad lines the objective allows. */
  errorBudget: number;
  /** errorRate / errorBudget: 1 spends the budget exactly over the window. */
  burnRate: number;
  /** 1 - burnRate: the share of the window's budget left (negative once overspent). */
  errorBudgetRemaining: number;
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;

/** The SLO over the `windowHours` before `now`, from the ingested lines of its service (error and fatal are bad). */
export async function sloStatus(db: Pick<Tx, 'opsLogEntry'>, slo: OpsSlo, now: Date): Promise<SloStatus> {
  const where = { projectId: slo.projectId, service: slo.service, timestamp: { gte: new Date(now.getTime() - slo.windowHours * 3_600_000), lte: now } };
  const total = await db.opsLogEntry.count({ where });
  const bad = total === 0 ? 0 : await db.opsLogEntry.count({ where: { ...where, level: { in: ['error', 'fatal'] } } });
  const errorRate = total === 0 ? 0 : bad / total;
  const errorBudget = 1 - slo.objective;
  const burnRate = errorRate / errorBudget;
  return { slo, total, bad, errorRate: round(errorRate), errorBudget: round(errorBudget), burnRate: round(burnRate), errorBudgetRemaining: round(1 - burnRate) };
}

/**
 * Re-evaluates an SLO after new lines: when the burn rate reaches the threshold (and was below it), ops.slo.burn is
 * emitted, once per crossing; falling below re-arms it. Returns whether it fired.
 */
async function evaluateSlo(tx: Tx, slo: OpsSlo, now: Date): Promise<boolean> {
  const s = await sloStatus(tx, slo, now);
  const over = s.total > 0 && s.burnRate >= slo.burnRateThreshold;
  if (over === slo.burning) return false;
  const { count } = await tx.opsSlo.updateMany({
    where: { id: slo.id, burning: slo.burning },
    data: { burning: over, ...(over ? { lastBurnAt: now } : {}), updatedAt: now },
  });
  if (count === 0 || !over) return false;
  await enqueueEvent(tx, now, slo.projectId, 'ops.slo.burn', {
    slo_id: slo.id,
    name: slo.name,
    service: slo.service,
    objective: slo.objective,
    window_hours: slo.windowHours,
    burn_rate: s.burnRate,
    burn_rate_threshold: slo.burnRateThreshold,
    error_budget_remaining: s.errorBudgetRemaining,
    bad: s.bad,
    total: s.total,
  });
  return true;
}

/** Audits ops_slo.create. */
export async function createSlo(ctx: Ctx, raw: unknown): Promise<SloStatus> {
  const input = parseInput(CreateSlo, raw);
  const projectId = await writeProject(ctx, input.project_id);
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const slo = await tx.opsSlo.create({
      data: {
        id: newId('slo', now.getTime()),
        projectId,
        name: input.name,
        service: input.service,
        objective: input.objective,
        windowHours: input.window_hours ?? 24,
        burnRateThreshold: input.burn_rate_threshold ?? 1,
        createdAt: now,
        updatedAt: now,
      },
    });
    await recordAudit(tx, ctx, 'ops_slo.create', { projectId, targetId: slo.id, data: { name: slo.name, service: slo.service, objective: slo.objective } });
    return sloStatus(tx, slo, now);
  });
}

export async function listSlos(ctx: Ctx, raw: unknown): Promise<Page<SloStatus>> {
  const query = parseInput(ListQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const page = await pageById(query, ctx.db.opsSlo, only(projectId, {}));
  const now = ctx.now();
  const data: SloStatus[] = [];
  for (const slo of page.data) data.push(await sloStatus(ctx.db, slo, now));
  return { ...page, data };
}

export async function getSlo(ctx: Ctx, sloId: string): Promise<SloStatus> {
  const row = await ctx.db.opsSlo.findFirst({ where: only(await readProject(ctx), { id: sloId }) });
  if (!row) throw notFound('slo_id', 'SLO');
  addressed(ctx, row.projectId);
  return sloStatus(ctx.db, row, ctx.now());
}
