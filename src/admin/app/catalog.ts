/**
 * The gateway's scopes, event types and actions come from the API (GraphQL `catalog`, as GET /v1/catalog), read once
 * after sign-in: the lists are the server's. What the console adds is presentation: scopes and event types grouped by
 * area, with the spec's one-line descriptions (scope table §5, event catalog §6.2). A name the API lists that no group
 * holds is shown under "Other"; a group's name the API does not list is not shown.
 * test/system/e2e checks that the groups hold each of the gateway's scopes and event types exactly once.
 */
export interface Entry {
  name: string;
  description: string;
}
export interface Group {
  area: string;
  entries: Entry[];
}

/** The gateway's tables (domain/auth/catalog.ts). */
export interface Catalog {
  scopes: string[];
  events: string[];
  /** Each action and the scopes that allow it (any one is enough); empty: any valid key. */
  actions: { name: string; scopes: string[] }[];
}

export const CATALOG = `query Catalog { catalog { scopes events actions { name scopes } } }`;

/** The groups holding exactly `names` (the API's list): labelled ones in the console's order, the rest under "Other". */
export function groupsFor(groups: readonly Group[], names: readonly string[]): Group[] {
  const listed = new Set(names);
  const labelled = new Set(groups.flatMap((g) => g.entries.map((e) => e.name)));
  const other = names.filter((n) => !labelled.has(n)).map((n) => ({ name: n, description: '' }));
  return [...groups, { area: 'Other', entries: other }]
    .map((g) => ({ ...g, entries: g.entries.filter((e) => listed.has(e.name)) }))
    .filter((g) => g.entries.length > 0);
}

/**
 * The scopes that allow any of `actions` (any one is enough), in the actions' order: [] when one of them needs only a
 * valid key, null when the API lists none of them (nothing then allows it).
 */
export function scopesFor(catalog: Catalog, actions: readonly string[]): string[] | null {
  const known = actions.flatMap((name) => catalog.actions.filter((a) => a.name === name));
  if (known.length === 0) return null;
  if (known.some((a) => a.scopes.length === 0)) return [];
  return [...new Set(known.flatMap((a) => a.scopes))];
}

/** Labels only: which area a scope belongs to and what it is for. Which scopes exist is the API's list. */
export const SCOPE_GROUPS: Group[] = [
  {
    area: 'Keys and audit',
    entries: [
      { name: 'keys:manage', description: 'Create, rotate, revoke and list keys.' },
      { name: 'audit:read', description: 'Export audit events.' },
    ],
  },
  {
    area: 'Inference',
    entries: [
      { name: 'inference:write', description: 'Create inference requests.' },
      { name: 'inference:read', description: 'Read retained inference responses and status.' },
      { name: 'models:read', description: 'List available models.' },
      { name: 'mcp:use', description: 'List and call MCP tools through /v1/mcp/{server_id} (narrowed by the key\'s mcp_tools).' },
    ],
  },
  {
    area: 'Governance and spend',
    entries: [
      { name: 'governance:manage', description: 'Webhooks, residency, dual-control policy, rate limits.' },
      { name: 'budgets:manage', description: 'Create and modify budgets.' },
      { name: 'usage:read', description: 'Read usage and cost data.' },
    ],
  },
  {
    area: 'Content and evaluation',
    entries: [
      { name: 'templates:manage', description: 'Create and modify prompt templates.' },
      { name: 'rag:write', description: 'Upload and manage RAG documents.' },
      { name: 'evals:write', description: 'Create evaluation runs.' },
    ],
  },
  {
    area: 'Verticals',
    entries: [
      { name: 'dev:read', description: 'Dev: read repositories, reviews, Q&A, tests.' },
      { name: 'dev:write', description: 'Dev: repositories, reviews, Q&A, tests.' },
      { name: 'legal:read', description: 'Legal: read matters, contracts, mappings, redlines.' },
      { name: 'legal:write', description: 'Legal: matters, contracts, mappings, redlines.' },
      { name: 'ops:read', description: 'Ops: read incidents, logs, post-mortems, connectors.' },
      { name: 'ops:write', description: 'Ops: incidents, logs, post-mortems, connectors.' },
      { name: 'risk:read', description: 'Risk: read cases, evidence, assessments, reports.' },
      { name: 'risk:write', description: 'Risk: cases, evidence, assessments, reports.' },
      { name: 'risk:approve', description: 'Risk: approve gated actions (dual control).' },
    ],
  },
];

/** Labels only, as SCOPE_GROUPS: which event types exist is the API's list. */
export const EVENT_GROUPS: Group[] = [
  {
    area: 'Inference and usage',
    entries: [
      { name: 'inference.completed', description: 'An inference finished, success or error.' },
      { name: 'usage.daily_summary', description: 'The daily usage rollup.' },
    ],
  },
  {
    area: 'Budgets',
    entries: [
      { name: 'budget.threshold', description: 'Spend crossed an alert threshold (80%, 95%).' },
      { name: 'budget.exceeded', description: 'The monthly hard stop was reached.' },
    ],
  },
  {
    area: 'Keys',
    entries: [
      { name: 'key.rotated', description: 'A key got a new secret.' },
      { name: 'key.revoked', description: 'A key was revoked.' },
    ],
  },
  {
    area: 'Governance',
    entries: [
      { name: 'policy.updated', description: 'A governance change was applied (limits, budget, routing, residency, PII, retention).' },
      { name: 'approval.approved', description: 'Dual control approved.' },
      { name: 'approval.rejected', description: 'Dual control rejected.' },
    ],
  },
  {
    area: 'Webhooks',
    entries: [{ name: 'webhook.test', description: 'A test event sent on request to one webhook ("Send test event"); it needs no subscription.' }],
  },
  {
    area: 'MCP gateway',
    entries: [{ name: 'mcp.tool.called', description: 'A tool call through the MCP gateway reached its server (ok, tool error or upstream error).' }],
  },
  {
    area: 'Evaluations',
    entries: [{ name: 'eval.run.completed', description: 'An evaluation run finished.' }],
  },
  {
    area: 'Batches',
    entries: [{ name: 'batch.completed', description: 'A batch ended: completed, failed, expired or cancelled.' }],
  },
  {
    area: 'Verticals',
    entries: [
      { name: 'dev.review.completed', description: 'Dev: a review finished.' },
      { name: 'dev.pull_request.summarized', description: 'Dev: a pull request summary finished.' },
      { name: 'ops.incident.opened', description: 'Ops: an incident was created.' },
      { name: 'ops.incident.closed', description: 'Ops: an incident was closed.' },
      { name: 'ops.slo.burn', description: 'Ops: the error budget is burning.' },
      { name: 'risk.case.closed', description: 'Risk: a case disposition was recorded.' },
      { name: 'risk.report.approved', description: 'Risk: a report was approved by dual control.' },
    ],
  },
];
