import { SvcError, invalid } from '../../errors/svc-error.ts';
import type { Scope } from '../keys/scopes.ts';

/**
 * Which scopes allow an action: any one of those listed, or `authenticated` (any valid key; the service then narrows
 * what the key sees, e.g. projects, or refuses it, e.g. operator-only project changes).
 */
export type ActionRule = readonly [Scope, ...Scope[]] | 'authenticated';

/**
 * The product's actions and who may do them (spec §5), read by both surfaces: each route declares its action (checked
 * by the auth hook, api/hooks/auth.ts), and each GraphQL field names its action (`authScopes: { action: 'key.create' }`,
 * graphql/builder.ts). Twins share one entry, so REST and GraphQL cannot drift apart.
 */
export const ACTIONS = {
  // Projects: a key sees its own project, the operator all; create and archive are operator-only (projects/service.ts).
  'project.create': 'authenticated',
  'project.list': 'authenticated',
  'project.read': 'authenticated',
  'project.archive': 'authenticated',
  'catalog.read': 'authenticated', // this table, the scopes and the event types (domain/auth/catalog.ts)

  'key.create': ['keys:manage'],
  'key.list': ['keys:manage'],
  'key.read': ['keys:manage'],
  'key.rotate': ['keys:manage'],
  'key.revoke': ['keys:manage'],
  'key.update': ['keys:manage'],

  // The audit log and the names of its actions.
  'audit.read': ['audit:read'],

  // Rate limits (spec 4.3) and the project budget (CONTRACT §7): reading needs the scope of changing.
  'rate_limits.read': ['governance:manage'],
  'rate_limits.update': ['governance:manage'],
  'budget.read': ['budgets:manage'],
  'budget.update': ['budgets:manage'],
  // CONTRACT §22: an end customer's bounds, as the project's (budget: budgets:manage; windows: governance:manage);
  // reading a customer and its spend: any of those, or usage:read.
  'customer.budget.update': ['budgets:manage'],
  'customer.rate_limits.update': ['governance:manage'],
  'customer.read': ['usage:read', 'budgets:manage', 'governance:manage'],
  'customer.list': ['usage:read', 'budgets:manage', 'governance:manage'],

  // CONTRACT §6: every webhook endpoint needs governance:manage.
  'webhook.create': ['governance:manage'],
  'webhook.list': ['governance:manage'],
  'webhook.read': ['governance:manage'],
  'webhook.disable': ['governance:manage'],
  'webhook.delivery.list': ['governance:manage'],
  'webhook.delivery.read': ['governance:manage'],
  'webhook.delivery.replay': ['governance:manage'],
  'webhook.test': ['governance:manage'],

  // MCP gateway (CONTRACT §20): servers are governance; listing and calling their tools through /v1/mcp/{id} is mcp:use.
  'mcp_server.create': ['governance:manage'],
  'mcp_server.list': ['governance:manage'],
  'mcp_server.read': ['governance:manage'],
  'mcp_server.update': ['governance:manage'],
  'mcp_server.delete': ['governance:manage'],
  'mcp.use': ['mcp:use'],

  // Inference (spec 4.4) and its OpenAI-compatible twins (CONTRACT §8).
  'inference.create': ['inference:write'],
  'model.list': ['models:read'],
  'model.read': ['models:read'],
  'provider.list': ['models:read'], // the providers file and their health (GraphQL providers)
  'usage.read': ['usage:read'],

  // Routing policies: changes need governance:manage; a key that routes inference may read them too.
  'routing_policy.create': ['governance:manage'],
  'routing_policy.read': ['governance:manage', 'inference:write'],
  'routing_policy.update': ['governance:manage'],
  'routing_policy.delete': ['governance:manage'],

  // Governance (CONTRACT §15): the dual control policy and residency pin; approvals also for risk:approve holders.
  'governance.read': ['governance:manage'],
  'governance.update': ['governance:manage'],
  'residency.update': ['governance:manage'],
  // Privacy (CONTRACT §11, §12): the project's PII default and retention; reading retained inference.
  'privacy.read': ['governance:manage'],
  'pii.update': ['governance:manage'],
  'retention.update': ['governance:manage'],
  'inference.read': ['inference:read'],
  'approval.list': ['governance:manage', 'risk:approve'],
  'approval.read': ['governance:manage', 'risk:approve'],
  'approval.approve': ['governance:manage', 'risk:approve'],
  'approval.reject': ['governance:manage', 'risk:approve'],
  // Only the key (or operator) that requested the change: the service refuses anyone else (404).
  'approval.claim': 'authenticated',
  // Operators of the admin console (CONTRACT §17): groups' roles are the operator key's (domain/operators/access.ts);
  // a project's console IP allowlist is governance.
  'operator_group.list': 'authenticated',
  'operator_group.roles_update': 'authenticated',
  'ip_allowlist.read': ['governance:manage'],
  'ip_allowlist.update': ['governance:manage'],
  // RAG documents (CONTRACT §13): rag:write; queries also inference:write. The embedding model is part of managing them.
  'rag_document.create': ['rag:write'],
  'rag_document.list': ['rag:write'],
  'rag_document.read': ['rag:write'],
  'rag_document.delete': ['rag:write'],
  'rag.query': ['rag:write', 'inference:write'],
  'rag_settings.read': ['rag:write'],
  'rag_settings.update': ['rag:write'],
  // Evaluation runs (CONTRACT §14: evals:write; reading also usage:read).
  'eval_run.create': ['evals:write'],
  'eval_run.list': ['evals:write', 'usage:read'],
  'eval_run.read': ['evals:write', 'usage:read'],
  'eval_run.cancel': ['evals:write'],
  // Files and batches (CONTRACT §21): as the OpenAI routes whose work they submit, inference:write.
  'file.create': ['inference:write'],
  'file.read': ['inference:write'],
  'file.delete': ['inference:write'],
  'batch.create': ['inference:write'],
  'batch.list': ['inference:write'],
  'batch.read': ['inference:write'],
  'batch.cancel': ['inference:write'],

  // Prompt templates (CONTRACT §10): templates:manage; rendering also with inference:write (what inference renders).
  'template.create': ['templates:manage'],
  'template.list': ['templates:manage'],
  'template.read': ['templates:manage'],
  'template.publish': ['templates:manage'],
  'template.render': ['templates:manage', 'inference:write'],
  // The verticals (CONTRACT §16, spec §5.6): writes need <vertical>:write, reads :read or :write; model work also needs
  // inference:write, which the service checks (domain/verticals/access.ts) as the scope table allows any one scope.
  'risk_case.create': ['risk:write'],
  'risk_case.list': ['risk:read', 'risk:write'],
  'risk_case.read': ['risk:read', 'risk:write'],
  'risk_case.update': ['risk:write'],
  'risk_case.close': ['risk:write'],
  'risk_evidence.create': ['risk:write'],
  'risk_evidence.list': ['risk:read', 'risk:write'],
  'risk_evidence.read': ['risk:read', 'risk:write'],
  'risk_evidence.update': ['risk:write'],
  'risk_assessment.create': ['risk:write'],
  'risk_assessment.list': ['risk:read', 'risk:write'],
  'risk_assessment.read': ['risk:read', 'risk:write'],
  'risk_report.create': ['risk:write'],
  'risk_report.list': ['risk:read', 'risk:write'],
  'risk_report.read': ['risk:read', 'risk:write'],
  // Always under dual control: another key (governance:manage or risk:approve) approves it (POST /v1/approvals/{id}/approve).
  'risk_report.approve': ['risk:write', 'risk:approve'],
  'ops_incident.create': ['ops:write'],
  'ops_incident.list': ['ops:read', 'ops:write'],
  'ops_incident.read': ['ops:read', 'ops:write'],
  'ops_incident.close': ['ops:write'],
  'ops_timeline.create': ['ops:write'],
  'ops_logs.ingest': ['ops:write'],
  'ops_logs.query': ['ops:write'],
  'ops_log_query.read': ['ops:read', 'ops:write'],
  'ops_postmortem.create': ['ops:write'],
  'ops_postmortem.list': ['ops:read', 'ops:write'],
  'ops_postmortem.read': ['ops:read', 'ops:write'],
  'ops_connector.create': ['ops:write'],
  'ops_connector.list': ['ops:read', 'ops:write'],
  'ops_connector.read': ['ops:read', 'ops:write'],
  'ops_connector.update': ['ops:write'],
  'ops_connector.scan': ['ops:write'],
  'ops_slo.create': ['ops:write'],
  'ops_slo.list': ['ops:read', 'ops:write'],
  'ops_slo.read': ['ops:read', 'ops:write'],
  // Legal (CONTRACT §16): model work (mappings, redlines) also needs inference:write (verticals/access.ts).
  'legal_matter.create': ['legal:write'],
  'legal_matter.list': ['legal:read', 'legal:write'],
  'legal_matter.read': ['legal:read', 'legal:write'],
  'legal_matter.update': ['legal:write'],
  'legal_matter.close': ['legal:write'],
  'legal_contract.create': ['legal:write'],
  'legal_contract.list': ['legal:read', 'legal:write'],
  'legal_contract.read': ['legal:read', 'legal:write'],
  'legal_mapping.create': ['legal:write'],
  'legal_mapping.list': ['legal:read', 'legal:write'],
  'legal_mapping.read': ['legal:read', 'legal:write'],
  'legal_redline.create': ['legal:write'],
  'legal_redline.list': ['legal:read', 'legal:write'],
  'legal_redline.read': ['legal:read', 'legal:write'],
  // Dev: Q&A, reviews, summaries and tests are model work (also inference:write, checked by the service).
  'dev_repository.create': ['dev:write'],
  'dev_repository.list': ['dev:read', 'dev:write'],
  'dev_repository.read': ['dev:read', 'dev:write'],
  'dev_repository.update': ['dev:write'],
  'dev_repository.index': ['dev:write'],
  'dev_question.create': ['dev:write'],
  'dev_review.create': ['dev:write'],
  'dev_review.list': ['dev:read', 'dev:write'],
  'dev_review.read': ['dev:read', 'dev:write'],
  'dev_pull_request_summary.create': ['dev:write'],
  'dev_pull_request_summary.list': ['dev:read', 'dev:write'],
  'dev_pull_request_summary.read': ['dev:read', 'dev:write'],
  'dev_test.create': ['dev:write'],
  'dev_test.list': ['dev:read', 'dev:write'],
  'dev_test.read': ['dev:read', 'dev:write'],
} as const satisfies Record<string, ActionRule>;

export type Action = keyof typeof ACTIONS;

/** The scopes that allow an action (any one is enough); empty for `authenticated`. */
export function scopesFor(action: Action): readonly Scope[] {
  const rule: ActionRule = ACTIONS[action];
  return rule === 'authenticated' ? [] : rule;
}

/** Whether a key holding `scopes` may perform the action (the operator holds every scope). */
export function allows(action: Action, scopes: readonly Scope[]): boolean {
  const rule: ActionRule = ACTIONS[action];
  return rule === 'authenticated' || rule.some((scope) => scopes.includes(scope));
}

/** How a refusal names what was missing: `keys:manage`, `governance:manage or inference:write`. */
export const scopeWords = (scopes: readonly Scope[]): string => scopes.join(' or ');

/** The resources a project can put under dual control (CONTRACT §15: PUT /v1/projects/{id}/governance). */
export const GUARDED_RESOURCES = ['rate_limits', 'budget', 'residency', 'routing', 'retention', 'pii', 'webhooks', 'keys', 'mcp_servers'] as const;
export type GuardedResource = (typeof GUARDED_RESOURCES)[number];

/**
 * Which actions change a guarded resource: when the project lists the resource, the action waits for a second key's
 * approval (domain/governance/guard.ts). `governance` is the policy itself, guarded once its list is non-empty.
 * A new guarded action: one row here and one `governed(...)` line in domain/governance/guarded.ts.
 */
/** Guarded whatever the project's list says: a Risk report is always approved by a second key (CONTRACT §16). */
export const ALWAYS_GUARDED = ['risk_reports'] as const;
export type AlwaysGuarded = (typeof ALWAYS_GUARDED)[number];

export const GUARDED_ACTIONS: Partial<Record<Action, GuardedResource | 'governance' | AlwaysGuarded>> = {
  'rate_limits.update': 'rate_limits',
  'budget.update': 'budget',
  'customer.budget.update': 'budget',
  'customer.rate_limits.update': 'rate_limits',
  'residency.update': 'residency',
  'routing_policy.create': 'routing',
  'routing_policy.update': 'routing',
  'routing_policy.delete': 'routing',
  'webhook.create': 'webhooks',
  'webhook.disable': 'webhooks',
  'webhook.delivery.replay': 'webhooks',
  'mcp_server.create': 'mcp_servers',
  'key.create': 'keys',
  'key.rotate': 'keys',
  'key.revoke': 'keys',
  'key.update': 'keys',
  'governance.update': 'governance',
  'pii.update': 'pii',
  'retention.update': 'retention',
  'risk_report.approve': 'risk_reports',
};

// ---- the models a key may use (CONTRACT §22): its model list, beside its scopes ----

/**
 * A key's model list (CONTRACT §22). Each entry is one of:
 * - `model`: that model id as the providers file names it, through any provider that serves it;
 * - `provider/model`: that model through one provider, named by its `name` or its `kind` in the providers file;
 * - `provider/*`: every model of that provider (by `name` or `kind`).
 * An entry matches a route when it is the route's model id, or `name/model`, `kind/model`, `name/*` or `kind/*` of it.
 * Entries naming a model no provider serves today are kept (the providers file may add it); only their shape is checked.
 */
export const MAX_KEY_MODELS = 100;
const MAX_ENTRY_CHARS = 200;
/** No whitespace or control characters; `*` only as the whole part after the first `/`. */
const ENTRY = /^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,62}\/\*|[^\s*/\u0000-\u001f\u007f][^\s*\u0000-\u001f\u007f]*)$/u;

/** The entries as stored (deduplicated, in order); refuses a malformed one (400 invalid_request, param models). */
export function checkKeyModels(entries: readonly string[] | null | undefined): string[] {
  if (entries === undefined || entries === null) return [];
  const bad = entries.find((e) => e.length > MAX_ENTRY_CHARS || !ENTRY.test(e) || e.endsWith('/'));
  if (bad !== undefined) {
    throw invalid('models', `models entries must be a model id, provider/model or provider/*: ${JSON.stringify(bad.slice(0, MAX_ENTRY_CHARS))} is not (at most ${MAX_ENTRY_CHARS} characters).`);
  }
  return [...new Set(entries)];
}

/** What a route is, for matching: its provider's name and kind, and the model id. */
export interface RouteName {
  provider: { name: string; kind: string };
  model: { id: string };
}

/** Whether a key's list (null: not narrowed) lets a request use this route. */
export function routeAllowed(models: readonly string[] | null | undefined, route: RouteName): boolean {
  if (!models) return true;
  const { name, kind } = route.provider;
  const id = route.model.id;
  for (const e of models) {
    if (e === id || e === `${name}/*` || e === `${kind}/*` || e === `${name}/${id}` || e === `${kind}/${id}`) return true;
  }
  return false;
}

/** The refusal of a model outside the key's list (CONTRACT §22: 403 insufficient_scope, param model). */
export function modelRefused(model: string): SvcError {
  return new SvcError('insufficient_scope', {
    param: 'model',
    message:
      model === 'auto'
        ? 'None of the routes "auto" would take is within this key\'s models.'
        : `This key may not use model ${JSON.stringify(model.slice(0, 200))} (it is outside the key's models).`,
  });
}

/**
 * Refuses a named model none of whose routes the key's model list (`caller.models`) allows. `routes`: the model's
 * routes. A caller without a list may use every model (CONTRACT §22): there is nothing to check, and no call.
 */
export function assertModelAllowed(models: readonly string[], model: string, routes: readonly RouteName[]): void {
  if (!routes.some((r) => routeAllowed(models, r))) throw modelRefused(model);
}

/** The routes within the key's model list (`caller.models`, when it has one); none left: 403 insufficient_scope, param model. */
export function routesWithinKey<R extends RouteName>(models: readonly string[], model: string, routes: R[]): R[] {
  const within = routes.filter((r) => routeAllowed(models, r));
  if (within.length === 0 && routes.length > 0) throw modelRefused(model);
  return within;
}

/**
 * The subset rule for models (CONTRACT §3, §22): the entries of `child` that `parent` does not cover (empty: within).
 * An entry is covered when the parent holds it, or, for `provider/model`, holds `provider/*`. A parent without a list
 * covers everything; a child without one is beyond any list. Read by the letter, not against today's providers file,
 * so a key's powers do not grow when the file changes.
 */
export function modelsBeyond(parent: readonly string[] | null, child: readonly string[] | null): string[] {
  if (parent === null) return [];
  if (child === null) return ['(every model)'];
  const held = new Set(parent);
  return child.filter((entry) => {
    if (held.has(entry)) return false;
    const slash = entry.indexOf('/');
    return !(slash > 0 && held.has(`${entry.slice(0, slash)}/*`));
  });
}
