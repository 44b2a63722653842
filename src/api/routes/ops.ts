import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { OpsConnector, OpsDraft, OpsIncident, OpsLogEntry, OpsTimelineEntry } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import {
  addTimelineEntry,
  closeIncident,
  createConnector,
  createSlo,
  draftPostmortem,
  getConnector,
  getIncident,
  getOpsDraft,
  getSlo,
  ingestLogs,
  listConnectors,
  listIncidents,
  listPostmortems,
  listSlos,
  listTimeline,
  openIncident,
  queryLogs,
  scanConnector,
  updateConnector,
  type SloStatus,
} from '../../domain/ops/service.ts';
import {
  AddTimelineEntry,
  CloseIncident,
  ConnectorIdParams,
  CreateConnector,
  CreateSlo,
  DraftPostmortem,
  IncidentIdParams,
  IngestLogs,
  ListIncidentsQuery,
  ListPostmortemsQuery,
  ListQuery,
  ListTimelineQuery,
  LogQueryIdParams,
  OpenIncident,
  PostmortemIdParams,
  QueryLogs,
  ScanConnector,
  SloIdParams,
  UpdateConnector,
} from '../../domain/ops/schema.ts';
import type { Static } from 'typebox';
import { ListOf, sendList } from '../list.ts';
import { Connector, ConnectorScan, Incident, LogIngest, LogQuery, LogQueryWithLines, Postmortem, Slo, TimelineEntry } from './ops-responses.ts';

export function presentIncident(i: OpsIncident) {
  return {
    id: i.id,
    object: 'svc.ops.incident' as const,
    project_id: i.projectId,
    title: i.title,
    severity: i.severity,
    service: i.service,
    status: i.status,
    resolution: i.resolution,
    opened_at: unixSeconds(i.openedAt),
    closed_at: unixOrNull(i.closedAt),
    created_at: unixSeconds(i.createdAt),
  };
}

export function presentTimelineEntry(e: OpsTimelineEntry) {
  return { id: e.id, object: 'svc.ops.timeline_entry' as const, incident_id: e.incidentId, kind: e.kind, message: e.message, actor: e.actor, at: unixSeconds(e.at) };
}

export function presentLogLine(l: OpsLogEntry) {
  return { id: l.id, timestamp: unixSeconds(l.timestamp), level: l.level, service: l.service, message: l.message, attributes: l.attributes, connector_id: l.connectorId };
}

/** A log query (lgq_, its model summary in `summary`) or a post-mortem (pmt_, its draft in `content`). */
export function presentOpsDraft(d: OpsDraft) {
  const base = { id: d.id, project_id: d.projectId, status: d.status, error: d.error ?? null, created_at: unixSeconds(d.createdAt), completed_at: unixOrNull(d.completedAt) };
  if (d.kind === 'log_query') {
    const p = d.params as { from: number; to: number; query: string };
    return { ...base, object: 'svc.ops.log_query' as const, from: p.from, to: p.to, query: p.query, matched: d.matched, summary: d.content ?? null };
  }
  return { ...base, object: 'svc.ops.postmortem' as const, incident_id: d.incidentId, content: d.content ?? null };
}

// One presenter for both kinds; each route answers one kind, so its schema is that kind's.
const presentLogQuery = (d: OpsDraft) => presentOpsDraft(d) as Static<typeof LogQuery>;
const presentPostmortem = (d: OpsDraft) => presentOpsDraft(d) as Static<typeof Postmortem>;

export function presentConnector(c: OpsConnector) {
  return {
    id: c.id,
    object: 'svc.ops.connector' as const,
    project_id: c.projectId,
    name: c.name,
    kind: c.kind,
    enabled: c.enabled,
    last_scan_at: unixOrNull(c.lastScanAt),
    created_at: unixSeconds(c.createdAt),
    updated_at: unixSeconds(c.updatedAt),
  };
}

export function presentSlo(s: SloStatus) {
  return {
    id: s.slo.id,
    object: 'svc.ops.slo' as const,
    project_id: s.slo.projectId,
    name: s.slo.name,
    service: s.slo.service,
    objective: s.slo.objective,
    window_hours: s.slo.windowHours,
    burn_rate_threshold: s.slo.burnRateThreshold,
    total_events: s.total,
    bad_events: s.bad,
    error_rate: s.errorRate,
    error_budget: s.errorBudget,
    error_budget_remaining: s.errorBudgetRemaining,
    burn_rate: s.burnRate,
    burning: s.slo.burning,
    last_burn_at: unixOrNull(s.slo.lastBurnAt),
    created_at: unixSeconds(s.slo.createdAt),
  };
}

/** CONTRACT §16, Ops: incidents and timelines, logs and their summaries, post-mortems, connectors, SLOs. */
export const opsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/ops/incidents', { config: { action: 'ops_incident.create' }, schema: { body: OpenIncident, response: { 200: Incident } } }, async (req) => presentIncident(await openIncident(req.ctx, req.body)));
  app.get('/v1/ops/incidents', { config: { action: 'ops_incident.list' }, schema: { querystring: ListIncidentsQuery, response: { 200: ListOf(Incident) } } }, async (req, reply) =>
    sendList(reply, await listIncidents(req.ctx, req.query), '/v1/ops/incidents', presentIncident),
  );
  app.get('/v1/ops/incidents/:incident_id', { config: { action: 'ops_incident.read' }, schema: { params: IncidentIdParams, response: { 200: Incident } } }, async (req) => presentIncident(await getIncident(req.ctx, req.params.incident_id)));
  app.post('/v1/ops/incidents/:incident_id/close', { config: { action: 'ops_incident.close' }, schema: { params: IncidentIdParams, body: CloseIncident, response: { 200: Incident } } }, async (req) =>
    presentIncident(await closeIncident(req.ctx, req.params.incident_id, req.body ?? {})),
  );
  app.post('/v1/ops/incidents/:incident_id/timeline', { config: { action: 'ops_timeline.create' }, schema: { params: IncidentIdParams, body: AddTimelineEntry, response: { 200: TimelineEntry } } }, async (req) =>
    presentTimelineEntry(await addTimelineEntry(req.ctx, req.params.incident_id, req.body)),
  );
  app.get('/v1/ops/incidents/:incident_id/timeline', { config: { action: 'ops_incident.read' }, schema: { params: IncidentIdParams, querystring: ListTimelineQuery, response: { 200: ListOf(TimelineEntry) } } }, async (req, reply) =>
    sendList(reply, await listTimeline(req.ctx, req.params.incident_id, req.query), `/v1/ops/incidents/${req.params.incident_id}/timeline`, presentTimelineEntry),
  );
  app.post('/v1/ops/incidents/:incident_id/postmortems', { config: { action: 'ops_postmortem.create' }, schema: { params: IncidentIdParams, body: DraftPostmortem, response: { 200: Postmortem } } }, async (req) =>
    presentPostmortem(await draftPostmortem(req.ctx, req.params.incident_id, req.body ?? {})),
  );
  app.get('/v1/ops/postmortems', { config: { action: 'ops_postmortem.list' }, schema: { querystring: ListPostmortemsQuery, response: { 200: ListOf(Postmortem) } } }, async (req, reply) =>
    sendList(reply, await listPostmortems(req.ctx, req.query), '/v1/ops/postmortems', presentPostmortem),
  );
  app.get('/v1/ops/postmortems/:postmortem_id', { config: { action: 'ops_postmortem.read' }, schema: { params: PostmortemIdParams, response: { 200: Postmortem } } }, async (req) =>
    presentPostmortem(await getOpsDraft(req.ctx, 'postmortem', req.params.postmortem_id)),
  );

  app.post('/v1/ops/logs', { config: { action: 'ops_logs.ingest' }, schema: { body: IngestLogs, response: { 200: LogIngest } } }, async (req) => {
    const r = await ingestLogs(req.ctx, req.body);
    return { object: 'svc.ops.log_ingest' as const, project_id: r.projectId, ingested: r.ingested, slo_burns: r.burning };
  });
  app.post('/v1/ops/logs/query', { config: { action: 'ops_logs.query' }, schema: { body: QueryLogs, response: { 200: LogQueryWithLines } } }, async (req) => {
    const { query, lines } = await queryLogs(req.ctx, req.body);
    return { ...presentLogQuery(query), lines: lines.map(presentLogLine) };
  });
  app.get('/v1/ops/logs/queries/:query_id', { config: { action: 'ops_log_query.read' }, schema: { params: LogQueryIdParams, response: { 200: LogQuery } } }, async (req) =>
    presentLogQuery(await getOpsDraft(req.ctx, 'log_query', req.params.query_id)),
  );

  app.post('/v1/ops/connectors', { config: { action: 'ops_connector.create' }, schema: { body: CreateConnector, response: { 200: Connector } } }, async (req) => presentConnector(await createConnector(req.ctx, req.body)));
  app.get('/v1/ops/connectors', { config: { action: 'ops_connector.list' }, schema: { querystring: ListQuery, response: { 200: ListOf(Connector) } } }, async (req, reply) =>
    sendList(reply, await listConnectors(req.ctx, req.query), '/v1/ops/connectors', presentConnector),
  );
  app.get('/v1/ops/connectors/:connector_id', { config: { action: 'ops_connector.read' }, schema: { params: ConnectorIdParams, response: { 200: Connector } } }, async (req) => presentConnector(await getConnector(req.ctx, req.params.connector_id)));
  app.patch('/v1/ops/connectors/:connector_id', { config: { action: 'ops_connector.update' }, schema: { params: ConnectorIdParams, body: UpdateConnector, response: { 200: Connector } } }, async (req) =>
    presentConnector(await updateConnector(req.ctx, req.params.connector_id, req.body)),
  );
  app.post('/v1/ops/connectors/:connector_id/scan', { config: { action: 'ops_connector.scan' }, schema: { params: ConnectorIdParams, body: ScanConnector, response: { 200: ConnectorScan } } }, async (req) => {
    const r = await scanConnector(req.ctx, req.params.connector_id, req.body ?? {});
    return { object: 'svc.ops.connector_scan' as const, connector: presentConnector(r.connector), ingested: r.ingested, slo_burns: r.burning, scanned_at: unixSeconds(r.scannedAt) };
  });

  app.post('/v1/ops/slos', { config: { action: 'ops_slo.create' }, schema: { body: CreateSlo, response: { 200: Slo } } }, async (req) => presentSlo(await createSlo(req.ctx, req.body)));
  app.get('/v1/ops/slos', { config: { action: 'ops_slo.list' }, schema: { querystring: ListQuery, response: { 200: ListOf(Slo) } } }, async (req, reply) => sendList(reply, await listSlos(req.ctx, req.query), '/v1/ops/slos', presentSlo));
  app.get('/v1/ops/slos/:slo_id', { config: { action: 'ops_slo.read' }, schema: { params: SloIdParams, response: { 200: Slo } } }, async (req) => presentSlo(await getSlo(req.ctx, req.params.slo_id)));
};
