import { Type } from 'typebox';
import { Bool, Int, Json, Num, NullableStr, ObjectType, Str, Unix, UnixOrNull } from '../response-fields.ts';

/** The response schemas of api/routes/ops.ts, field for field as its presenters write them. */

export const Incident = Type.Object(
  {
    id: Str('The incident id.'),
    object: ObjectType('svc.ops.incident'),
    project_id: Str('The project it belongs to.'),
    title: Str('Its title.'),
    severity: Str('sev1 to sev4 (as given).'),
    service: NullableStr('The service affected, or null.'),
    status: Str('open or closed.'),
    resolution: NullableStr('How it was resolved, or null.'),
    opened_at: Unix('Opened'),
    closed_at: UnixOrNull('Closed'),
    created_at: Unix('Created'),
  },
  { description: 'An incident.' },
);

export const TimelineEntry = Type.Object(
  {
    id: Str('The entry id.'),
    object: ObjectType('svc.ops.timeline_entry'),
    incident_id: Str('The incident.'),
    kind: Str('What kind of entry (note, status, action…).'),
    message: Str('What happened.'),
    actor: Str('Who wrote it (a key or operator id).'),
    at: Unix('When'),
  },
  { description: "An entry of an incident's timeline." },
);

const LogLine = Type.Object(
  {
    id: Str('The line id.'),
    timestamp: Unix('When it was logged'),
    level: Str('Its level.'),
    service: Str('The service that logged it.'),
    message: Str('Its message.'),
    attributes: Json('Its attributes (a JSON object).'),
    connector_id: NullableStr('The connector that brought it in, or null when posted.'),
  },
  { description: 'A log line.' },
);

const draftHead = {
  id: Str('The id.'),
  project_id: Str('The project it belongs to.'),
  status: Str('queued, running, completed or failed.'),
  error: Json("A failed draft's why, {code, message}, or null."),
  created_at: Unix('Requested'),
  completed_at: UnixOrNull('Finished'),
};

const logQueryFields = {
  ...draftHead,
  object: ObjectType('svc.ops.log_query'),
  from: Num('Start of the window (Unix seconds).'),
  to: Num('End of the window (Unix seconds).'),
  query: Str('The text searched for.'),
  matched: Int('Lines matched.'),
  summary: Json("The model's summary of the lines; null until completed."),
};
export const LogQuery = Type.Object(logQueryFields, { description: 'A log query (lgq_) and its model summary.' });
export const LogQueryWithLines = Type.Object(
  { ...logQueryFields, lines: Type.Array(LogLine, { description: 'The lines matched.' }) },
  { description: 'A log query (lgq_) with the lines it matched.' },
);

export const Postmortem = Type.Object(
  {
    ...draftHead,
    object: ObjectType('svc.ops.postmortem'),
    incident_id: NullableStr('The incident.'),
    content: Json("The model's draft; null until completed."),
  },
  { description: 'A post-mortem (pmt_).' },
);

export const LogIngest = Type.Object(
  {
    object: ObjectType('svc.ops.log_ingest'),
    project_id: Str('The project.'),
    ingested: Int('Lines stored.'),
    slo_burns: Type.Array(Type.String(), { description: 'The SLOs that started burning, by id.' }),
  },
  { description: 'What a log post stored.' },
);

export const Connector = Type.Object(
  {
    id: Str('The connector id.'),
    object: ObjectType('svc.ops.connector'),
    project_id: Str('The project it belongs to.'),
    name: Str('Its name.'),
    kind: Str('What it reads from.'),
    enabled: Bool('Whether it scans.'),
    last_scan_at: UnixOrNull('Last scanned'),
    created_at: Unix('Created'),
    updated_at: Unix('Last changed'),
  },
  { description: 'A log connector.' },
);

export const ConnectorScan = Type.Object(
  {
    object: ObjectType('svc.ops.connector_scan'),
    connector: Connector,
    ingested: Int('Lines stored.'),
    slo_burns: Type.Array(Type.String(), { description: 'The SLOs that started burning, by id.' }),
    scanned_at: Unix('Scanned'),
  },
  { description: "A connector's scan." },
);

export const Slo = Type.Object(
  {
    id: Str('The SLO id.'),
    object: ObjectType('svc.ops.slo'),
    project_id: Str('The project it belongs to.'),
    name: Str('Its name.'),
    service: Str('The service it measures.'),
    objective: Num('The share of good lines aimed at (e.g. 0.999).'),
    window_hours: Int('The window it is measured over, in hours.'),
    burn_rate_threshold: Num('The burn rate at which it burns.'),
    total_events: Int('Lines in the window.'),
    bad_events: Int('Error lines in the window.'),
    error_rate: Num('bad / total over the window (0 without lines).'),
    error_budget: Num('1 - objective.'),
    error_budget_remaining: Num("1 - burn_rate: the share of the window's budget left (negative once overspent)."),
    burn_rate: Num('error_rate / error_budget.'),
    burning: Bool('Whether it is burning.'),
    last_burn_at: UnixOrNull('Last started burning'),
    created_at: Unix('Created'),
  },
  { description: 'A service-level objective and its current state.' },
);
