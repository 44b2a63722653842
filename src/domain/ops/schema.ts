import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';
import { Instructions, Text } from '../verticals/schema.ts';

export const SEVERITIES = ['sev1', 'sev2', 'sev3', 'sev4'] as const;
export const LEVELS = ['debug', 'info', 'warn', 'error', 'fatal'] as const;
export const INCIDENT_STATUSES = ['open', 'closed'] as const;
export const MAX_ENTRIES_PER_CALL = 1000;

const Unix = (description: string) => Type.Integer({ minimum: 0, maximum: 253402300799, description, ...says('must be a Unix time in seconds') });

/** POST /v1/ops/incidents, GraphQL openIncident: emits ops.incident.opened. */
export const OpenIncident = Input({
  project_id: ProjectIdField,
  title: Text(200, 'What is happening.'),
  severity: Type.Enum(SEVERITIES, { description: `One of ${SEVERITIES.join(', ')} (sev1 the worst).`, ...says(`must be one of ${SEVERITIES.join(', ')}`) }),
  service: Type.Optional(Text(100, 'The service affected (its log lines feed the post-mortem).')),
  summary: Type.Optional(Text(4000, 'The first word on it; the first timeline entry.')),
});
export type OpenIncident = Static<typeof OpenIncident>;

/** POST /v1/ops/incidents/{incident_id}/close, GraphQL closeIncident: emits ops.incident.closed. */
export const CloseIncident = Input({ project_id: ProjectIdField, resolution: Type.Optional(Text(4000, 'How it was resolved.')) });
export type CloseIncident = Static<typeof CloseIncident>;

export const ListIncidentsQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  status: Type.Optional(Type.Enum(INCIDENT_STATUSES, { description: 'Only incidents in this status.', ...says('must be open or closed') })),
});

/** POST /v1/ops/incidents/{incident_id}/timeline, GraphQL addTimelineEntry. */
export const AddTimelineEntry = Input({ project_id: ProjectIdField, message: Text(4000, 'What happened or was done.') });
export type AddTimelineEntry = Static<typeof AddTimelineEntry>;
export const ListTimelineQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });

const LogEntry = Type.Object(
  {
    timestamp: Type.Optional(Unix('When the line was written (default: now).')),
    level: Type.Enum(LEVELS, { description: `One of ${LEVELS.join(', ')}; error and fatal count against SLOs.`, ...says(`must be one of ${LEVELS.join(', ')}`) }),
    service: Text(100, 'The service that wrote the line.'),
    message: Text(10_000, 'The line.'),
    attributes: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'Structured fields of the line.' })),
  },
  { additionalProperties: false },
);
const Entries = (description: string) =>
  Type.Array(LogEntry, { minItems: 1, maxItems: MAX_ENTRIES_PER_CALL, description, ...says(`must be a list of 1 to ${MAX_ENTRIES_PER_CALL} log lines`) });

/** POST /v1/ops/logs, GraphQL ingestLogs: SLOs are evaluated after each call. */
export const IngestLogs = Input({ project_id: ProjectIdField, entries: Entries('The log lines.') });
export type IngestLogs = Static<typeof IngestLogs>;

/** POST /v1/ops/logs/query, GraphQL queryLogs: a window up to the plan's cap (409 query_window_too_large). */
export const QueryLogs = Input({
  project_id: ProjectIdField,
  from: Unix('The window\'s start (Unix seconds, inclusive).'),
  to: Unix('The window\'s end (Unix seconds, inclusive); at most the plan\'s cap after from (starter 24 h, growth 7 d, enterprise 30 d).'),
  query: Type.String({
    maxLength: 500,
    description: 'Words the message must contain (case-insensitive), and level:<level> / service:<name> filters; empty: every line.',
    ...says('must be a string of at most 500 characters'),
  }),
});
export type QueryLogs = Static<typeof QueryLogs>;

/** POST /v1/ops/incidents/{incident_id}/postmortems, GraphQL draftPostmortem. */
export const DraftPostmortem = Input({ project_id: ProjectIdField, instructions: Instructions });
export type DraftPostmortem = Static<typeof DraftPostmortem>;
export const ListPostmortemsQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  incident_id: Type.Optional(Type.String({ description: 'Only those of this incident (inc_…).' })),
});

/** POST /v1/ops/connectors, GraphQL createConnector. */
export const CreateConnector = Input({
  project_id: ProjectIdField,
  name: Text(100, 'A name of yours.'),
  kind: Text(50, 'Where its lines come from (syslog, cloudwatch, loki…).'),
  enabled: Type.Optional(Type.Boolean({ description: 'Default true; a scan of a disabled connector is 403 connector_disabled.', ...says('must be true or false') })),
});
export type CreateConnector = Static<typeof CreateConnector>;

/** PATCH /v1/ops/connectors/{connector_id}, GraphQL updateConnector. */
export const UpdateConnector = Input({
  project_id: ProjectIdField,
  name: Type.Optional(Text(100, 'A name of yours.')),
  enabled: Type.Optional(Type.Boolean({ description: 'Enable or disable scans.', ...says('must be true or false') })),
});
export type UpdateConnector = Static<typeof UpdateConnector>;

/** POST /v1/ops/connectors/{connector_id}/scan: the lines the connector collected (ingested as by POST /v1/ops/logs). */
export const ScanConnector = Input({ project_id: ProjectIdField, entries: Type.Optional(Entries('The lines the scan collected.')) });
export type ScanConnector = Static<typeof ScanConnector>;

/** POST /v1/ops/slos, GraphQL createSlo. */
export const CreateSlo = Input({
  project_id: ProjectIdField,
  name: Text(100, 'A name of yours.'),
  service: Text(100, 'The service whose log lines count: error and fatal lines are bad, the others good.'),
  objective: Type.Number({ exclusiveMinimum: 0, exclusiveMaximum: 1, description: 'The target share of good lines, e.g. 0.99.', ...says('must be a number between 0 and 1 (exclusive)') }),
  window_hours: Type.Optional(Type.Integer({ minimum: 1, maximum: 720, description: 'The window the budget is computed over (default 24).', ...says('must be an integer from 1 to 720') })),
  burn_rate_threshold: Type.Optional(
    Type.Number({ exclusiveMinimum: 0, maximum: 1000, description: 'ops.slo.burn fires when the burn rate reaches it (default 1: the budget spent exactly over the window).', ...says('must be a number above 0 and at most 1000') }),
  ),
});
export type CreateSlo = Static<typeof CreateSlo>;

export const ListQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });

export const IncidentIdParams = PathId('incident_id', "The incident's id (inc_…).");
export const PostmortemIdParams = PathId('postmortem_id', "The post-mortem's id (pmt_…).");
export const LogQueryIdParams = PathId('query_id', "The log query's id (lgq_…).");
export const ConnectorIdParams = PathId('connector_id', "The connector's id (con_…).");
export const SloIdParams = PathId('slo_id', "The SLO's id (slo_…).");
