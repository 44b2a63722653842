import type { OpsConnector, OpsDraft, OpsIncident, OpsLogEntry, OpsTimelineEntry } from '../generated/prisma/client.ts';
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
  type IngestResult,
  type SloStatus,
} from '../domain/ops/service.ts';
import { CreateConnector, CreateSlo, OpenIncident, QueryLogs } from '../domain/ops/schema.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { inputTypeFrom, listFilters, serviceInput } from './inputs.ts';

const TimelineEntryRef = builder.objectRef<OpsTimelineEntry>('OpsTimelineEntry').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    incidentId: t.exposeID('incidentId'),
    kind: t.exposeString('kind', { description: 'opened, note or closed.' }),
    message: t.exposeString('message'),
    actor: t.exposeString('actor', { description: 'The key that wrote it.' }),
    at: t.expose('at', { type: 'UnixSeconds' }),
  }),
});

const IncidentRef = builder.objectRef<OpsIncident>('OpsIncident').implement({
  description: 'An Ops incident: open, then closed; its timeline newest first.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    title: t.exposeString('title'),
    severity: t.exposeString('severity'),
    service: t.exposeString('service', { nullable: true }),
    status: t.exposeString('status'),
    resolution: t.exposeString('resolution', { nullable: true }),
    openedAt: t.expose('openedAt', { type: 'UnixSeconds' }),
    closedAt: t.expose('closedAt', { type: 'UnixSeconds', nullable: true }),
    timeline: t.connection(
      {
        type: TimelineEntryRef,
        authScopes: { action: 'ops_incident.read' },
        resolve: (i, args, { ctx }) => serviceConnection(args, (query) => listTimeline(ctx, i.id, query)),
      },
      { name: 'OpsTimelineConnection' },
      { name: 'OpsTimelineEdge' },
    ),
  }),
});

const LogLineRef = builder.objectRef<OpsLogEntry>('OpsLogLine').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    timestamp: t.expose('timestamp', { type: 'UnixSeconds' }),
    level: t.exposeString('level'),
    service: t.exposeString('service'),
    message: t.exposeString('message'),
    attributes: t.field({ type: 'JSON', resolve: (l) => l.attributes }),
    connectorId: t.exposeString('connectorId', { nullable: true }),
  }),
});

const LogQueryRef = builder.objectRef<OpsDraft & { lines?: OpsLogEntry[] }>('OpsLogQuery').implement({
  description: 'A log query: its matches counted at once, its model summary drafted in the background.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    from: t.int({ resolve: (d) => (d.params as { from: number }).from }),
    to: t.int({ resolve: (d) => (d.params as { to: number }).to }),
    query: t.string({ resolve: (d) => (d.params as { query: string }).query }),
    matched: t.exposeInt('matched'),
    status: t.exposeString('status'),
    summary: t.field({ type: 'JSON', nullable: true, resolve: (d) => d.content ?? null }),
    error: t.field({ type: 'JSON', nullable: true, resolve: (d) => d.error ?? null }),
    lines: t.field({ type: [LogLineRef], nullable: true, description: 'The newest matching lines (only in queryLogs\' answer).', resolve: (d) => d.lines ?? null }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    completedAt: t.expose('completedAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

const PostmortemRef = builder.objectRef<OpsDraft>('OpsPostmortem').implement({
  description: "A post-mortem drafted by the model from an incident's timeline and logs.",
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    incidentId: t.exposeID('incidentId', { nullable: true }),
    status: t.exposeString('status'),
    content: t.field({ type: 'JSON', nullable: true, resolve: (d) => d.content ?? null }),
    error: t.field({ type: 'JSON', nullable: true, resolve: (d) => d.error ?? null }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    completedAt: t.expose('completedAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

const ConnectorRef = builder.objectRef<OpsConnector>('OpsConnector').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    name: t.exposeString('name'),
    kind: t.exposeString('kind'),
    enabled: t.exposeBoolean('enabled'),
    lastScanAt: t.expose('lastScanAt', { type: 'UnixSeconds', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
  }),
});

const SloRef = builder.objectRef<SloStatus>('OpsSlo').implement({
  description: 'A service level objective and its error budget, computed from the ingested lines of its window.',
  fields: (t) => ({
    id: t.id({ resolve: (s) => s.slo.id }),
    projectId: t.id({ resolve: (s) => s.slo.projectId }),
    name: t.string({ resolve: (s) => s.slo.name }),
    service: t.string({ resolve: (s) => s.slo.service }),
    objective: t.float({ resolve: (s) => s.slo.objective }),
    windowHours: t.int({ resolve: (s) => s.slo.windowHours }),
    burnRateThreshold: t.float({ resolve: (s) => s.slo.burnRateThreshold }),
    totalEvents: t.int({ resolve: (s) => s.total }),
    badEvents: t.int({ resolve: (s) => s.bad }),
    errorRate: t.float({ resolve: (s) => s.errorRate }),
    errorBudget: t.float({ resolve: (s) => s.errorBudget }),
    errorBudgetRemaining: t.float({ resolve: (s) => s.errorBudgetRemaining }),
    burnRate: t.float({ resolve: (s) => s.burnRate }),
    burning: t.boolean({ resolve: (s) => s.slo.burning }),
  }),
});

const IngestResultRef = builder.objectRef<IngestResult>('OpsLogIngest').implement({
  fields: (t) => ({
    ingested: t.exposeInt('ingested'),
    sloBurns: t.stringList({ description: 'The SLOs that started burning (ops.slo.burn emitted).', resolve: (r) => r.burning }),
  }),
});

const OpenIncidentInput = inputTypeFrom('OpenIncidentInput', OpenIncident);
const QueryLogsInput = inputTypeFrom('QueryLogsInput', QueryLogs);
const CreateConnectorInput = inputTypeFrom('CreateConnectorInput', CreateConnector);
const CreateSloInput = inputTypeFrom('CreateSloInput', CreateSlo);

builder.queryFields((t) => ({
  opsIncidents: t.connection(
    {
      type: IncidentRef,
      nullable: true,
      authScopes: { action: 'ops_incident.list' },
      args: { projectId: t.arg.id(), status: t.arg.string() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listIncidents(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'OpsIncidentConnection' },
    { name: 'OpsIncidentEdge' },
  ),
  opsIncident: t.field({
    type: IncidentRef,
    nullable: true,
    authScopes: { action: 'ops_incident.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getIncident(ctx, String(args.id)),
  }),
  opsLogQuery: t.field({
    type: LogQueryRef,
    nullable: true,
    authScopes: { action: 'ops_log_query.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getOpsDraft(ctx, 'log_query', String(args.id)),
  }),
  opsPostmortems: t.connection(
    {
      type: PostmortemRef,
      nullable: true,
      authScopes: { action: 'ops_postmortem.list' },
      args: { projectId: t.arg.id(), incidentId: t.arg.id() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listPostmortems(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'OpsPostmortemConnection' },
    { name: 'OpsPostmortemEdge' },
  ),
  opsPostmortem: t.field({
    type: PostmortemRef,
    nullable: true,
    authScopes: { action: 'ops_postmortem.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getOpsDraft(ctx, 'postmortem', String(args.id)),
  }),
  opsConnectors: t.connection(
    {
      type: ConnectorRef,
      nullable: true,
      authScopes: { action: 'ops_connector.list' },
      args: { projectId: t.arg.id() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listConnectors(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'OpsConnectorConnection' },
    { name: 'OpsConnectorEdge' },
  ),
  opsConnector: t.field({
    type: ConnectorRef,
    nullable: true,
    authScopes: { action: 'ops_connector.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getConnector(ctx, String(args.id)),
  }),
  opsSlos: t.connection(
    {
      type: SloRef,
      nullable: true,
      authScopes: { action: 'ops_slo.list' },
      args: { projectId: t.arg.id() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listSlos(ctx, { ...query, ...listFilters(args) }), (s) => s.slo.id),
    },
    { name: 'OpsSloConnection' },
    { name: 'OpsSloEdge' },
  ),
  opsSlo: t.field({
    type: SloRef,
    nullable: true,
    authScopes: { action: 'ops_slo.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getSlo(ctx, String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  openIncident: t.field({
    type: IncidentRef,
    nullable: true,
    authScopes: { action: 'ops_incident.create' },
    description: 'Emits ops.incident.opened; audits ops_incident.create.',
    args: { input: t.arg({ type: OpenIncidentInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => openIncident(ctx, serviceInput(input)),
  }),
  closeIncident: t.field({
    type: IncidentRef,
    nullable: true,
    authScopes: { action: 'ops_incident.close' },
    description: 'Closing twice returns the same incident. Emits ops.incident.closed (once); audits ops_incident.close.',
    args: { id: t.arg.id({ required: true }), resolution: t.arg.string() },
    resolve: (_root, { id, ...input }, { ctx }) => closeIncident(ctx, String(id), listFilters(input)),
  }),
  addTimelineEntry: t.field({
    type: TimelineEntryRef,
    nullable: true,
    authScopes: { action: 'ops_timeline.create' },
    args: { incidentId: t.arg.id({ required: true }), message: t.arg.string({ required: true }) },
    resolve: (_root, { incidentId, message }, { ctx }) => addTimelineEntry(ctx, String(incidentId), { message }),
  }),
  ingestLogs: t.field({
    type: IngestResultRef,
    nullable: true,
    authScopes: { action: 'ops_logs.ingest' },
    description: 'entries as REST takes them ({timestamp?, level, service, message, attributes?}); SLOs are evaluated (ops.slo.burn).',
    args: { projectId: t.arg.id(), entries: t.arg({ type: 'JSON', required: true }) },
    resolve: (_root, args, { ctx }) => ingestLogs(ctx, listFilters(args)),
  }),
  queryLogs: t.field({
    type: LogQueryRef,
    nullable: true,
    authScopes: { action: 'ops_logs.query' },
    description: "A window over the plan's cap is query_window_too_large. The summary is drafted in the background.",
    args: { input: t.arg({ type: QueryLogsInput, required: true }) },
    resolve: async (_root, { input }, { ctx }) => {
      const { query, lines } = await queryLogs(ctx, serviceInput(input));
      return { ...query, lines };
    },
  }),
  draftPostmortem: t.field({
    type: PostmortemRef,
    nullable: true,
    authScopes: { action: 'ops_postmortem.create' },
    args: { incidentId: t.arg.id({ required: true }), instructions: t.arg.string() },
    resolve: (_root, { incidentId, ...input }, { ctx }) => draftPostmortem(ctx, String(incidentId), listFilters(input)),
  }),
  createConnector: t.field({
    type: ConnectorRef,
    nullable: true,
    authScopes: { action: 'ops_connector.create' },
    args: { input: t.arg({ type: CreateConnectorInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => createConnector(ctx, serviceInput(input)),
  }),
  updateConnector: t.field({
    type: ConnectorRef,
    nullable: true,
    authScopes: { action: 'ops_connector.update' },
    args: { id: t.arg.id({ required: true }), name: t.arg.string(), enabled: t.arg.boolean() },
    resolve: (_root, { id, ...input }, { ctx }) => updateConnector(ctx, String(id), listFilters(input)),
  }),
  scanConnector: t.field({
    type: ConnectorRef,
    nullable: true,
    authScopes: { action: 'ops_connector.scan' },
    description: 'A disabled connector answers connector_disabled. entries: the lines the scan collected.',
    args: { id: t.arg.id({ required: true }), entries: t.arg({ type: 'JSON' }) },
    resolve: async (_root, { id, ...input }, { ctx }) => (await scanConnector(ctx, String(id), listFilters(input))).connector,
  }),
  createSlo: t.field({
    type: SloRef,
    nullable: true,
    authScopes: { action: 'ops_slo.create' },
    args: { input: t.arg({ type: CreateSloInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => createSlo(ctx, serviceInput(input)),
  }),
}));
