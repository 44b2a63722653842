import { scopeWords, scopesFor, type Action } from '../domain/auth/actions.ts';
import type { Scope } from '../domain/keys/scopes.ts';

/**
 * What each route does: an action of domain/auth/actions.ts (whose scopes GraphQL's twin field checks too), `public`
 * (no key), or `authenticated` for /graphql itself (each field checks its own action). The auth hook reads this one
 * table; a /v1 or /graphql route missing from it fails at start.
 */
export type RouteAction = Action | 'authenticated' | 'public';

export const ROUTE_ACTIONS: Record<string, RouteAction> = {
  'GET /healthz': 'public',
  'GET /readyz': 'public',
  'GET /docs/errors': 'public',
  // The admin console's static files; the page itself calls /graphql with the key the user enters.
  'GET /admin': 'public',
  'GET /admin/*': 'public',
  'GET /favicon.ico': 'public',

  'POST /v1/projects': 'project.create',
  'GET /v1/projects': 'project.list',
  'GET /v1/projects/:project_id': 'project.read',
  'POST /v1/projects/:project_id/archive': 'project.archive',
  'GET /v1/catalog': 'catalog.read',

  'POST /v1/keys': 'key.create',
  'GET /v1/keys': 'key.list',
  'GET /v1/keys/:key_id': 'key.read',
  'POST /v1/keys/:key_id/rotate': 'key.rotate',
  'POST /v1/keys/:key_id/revoke': 'key.revoke',

  'GET /v1/audit/events': 'audit.read',

  'PUT /v1/projects/:project_id/rate-limits': 'rate_limits.update',
  'GET /v1/projects/:project_id/rate-limits': 'rate_limits.read',
  'PUT /v1/projects/:project_id/budget': 'budget.update',
  'GET /v1/projects/:project_id/budget': 'budget.read',

  'POST /v1/webhooks': 'webhook.create',
  'GET /v1/webhooks': 'webhook.list',
  'GET /v1/webhooks/:webhook_id': 'webhook.read',
  'POST /v1/webhooks/:webhook_id/disable': 'webhook.disable',
  'GET /v1/webhooks/:webhook_id/deliveries': 'webhook.delivery.list',
  'POST /v1/webhooks/:webhook_id/deliveries/:delivery_id/replay': 'webhook.delivery.replay',
  'POST /v1/webhooks/:webhook_id/test': 'webhook.test',

  'POST /v1/inference': 'inference.create',
  'POST /v1/chat/completions': 'inference.create',
  'POST /v1/responses': 'inference.create',
  'POST /v1/embeddings': 'inference.create',
  'GET /v1/models': 'model.list',
  'GET /v1/models/*': 'model.read',
  'GET /v1/usage': 'usage.read',

  'POST /v1/evals': 'eval_run.create',
  'GET /v1/evals': 'eval_run.list',
  'GET /v1/evals/:eval_id': 'eval_run.read',
  'GET /v1/evals/:eval_id/results': 'eval_run.read',
  'POST /v1/evals/:eval_id/cancel': 'eval_run.cancel',

  'POST /v1/routing/policies': 'routing_policy.create',
  'GET /v1/routing/policies': 'routing_policy.read',
  'GET /v1/routing/policies/:policy_id': 'routing_policy.read',
  'POST /v1/routing/policies/:policy_id': 'routing_policy.update',
  'PATCH /v1/routing/policies/:policy_id': 'routing_policy.update',
  'DELETE /v1/routing/policies/:policy_id': 'routing_policy.delete',

  'PUT /v1/projects/:project_id/governance': 'governance.update',
  'GET /v1/projects/:project_id/governance': 'governance.read',
  'PUT /v1/projects/:project_id/residency': 'residency.update',
  'PUT /v1/projects/:project_id/pii': 'pii.update',
  'GET /v1/projects/:project_id/pii': 'privacy.read',
  'PUT /v1/projects/:project_id/retention': 'retention.update',
  'GET /v1/projects/:project_id/retention': 'privacy.read',
  'GET /v1/inference/:inference_id': 'inference.read',
  'POST /v1/templates': 'template.create',
  'GET /v1/templates': 'template.list',
  'GET /v1/templates/:template_id': 'template.read',
  'POST /v1/templates/:template_id/versions': 'template.publish',
  'GET /v1/templates/:template_id/versions': 'template.read',
  'GET /v1/templates/:template_id/versions/:version': 'template.read',
  'POST /v1/templates/:template_id/render': 'template.render',
  'GET /v1/approvals': 'approval.list',
  'GET /v1/approvals/:approval_id': 'approval.read',
  'POST /v1/approvals/:approval_id/approve': 'approval.approve',
  'POST /v1/approvals/:approval_id/reject': 'approval.reject',
  'POST /v1/approvals/:approval_id/claim': 'approval.claim',

  // The verticals (CONTRACT §16).
  'POST /v1/risk/cases': 'risk_case.create',
  'GET /v1/risk/cases': 'risk_case.list',
  'GET /v1/risk/cases/:case_id': 'risk_case.read',
  'PATCH /v1/risk/cases/:case_id': 'risk_case.update',
  'POST /v1/risk/cases/:case_id/close': 'risk_case.close',
  'POST /v1/risk/cases/:case_id/evidence': 'risk_evidence.create',
  'GET /v1/risk/cases/:case_id/evidence': 'risk_evidence.list',
  'GET /v1/risk/evidence/:evidence_id': 'risk_evidence.read',
  'GET /v1/risk/evidence/:evidence_id/content': 'risk_evidence.read',
  'PATCH /v1/risk/evidence/:evidence_id': 'risk_evidence.update',
  'POST /v1/risk/cases/:case_id/assessments': 'risk_assessment.create',
  'GET /v1/risk/assessments': 'risk_assessment.list',
  'GET /v1/risk/assessments/:assessment_id': 'risk_assessment.read',
  'POST /v1/risk/cases/:case_id/reports': 'risk_report.create',
  'GET /v1/risk/reports': 'risk_report.list',
  'GET /v1/risk/reports/:report_id': 'risk_report.read',
  'POST /v1/risk/reports/:report_id/approve': 'risk_report.approve',
  'POST /v1/ops/incidents': 'ops_incident.create',
  'GET /v1/ops/incidents': 'ops_incident.list',
  'GET /v1/ops/incidents/:incident_id': 'ops_incident.read',
  'POST /v1/ops/incidents/:incident_id/close': 'ops_incident.close',
  'POST /v1/ops/incidents/:incident_id/timeline': 'ops_timeline.create',
  'GET /v1/ops/incidents/:incident_id/timeline': 'ops_incident.read',
  'POST /v1/ops/incidents/:incident_id/postmortems': 'ops_postmortem.create',
  'GET /v1/ops/postmortems': 'ops_postmortem.list',
  'GET /v1/ops/postmortems/:postmortem_id': 'ops_postmortem.read',
  'POST /v1/ops/logs': 'ops_logs.ingest',
  'POST /v1/ops/logs/query': 'ops_logs.query',
  'GET /v1/ops/logs/queries/:query_id': 'ops_log_query.read',
  'POST /v1/ops/connectors': 'ops_connector.create',
  'GET /v1/ops/connectors': 'ops_connector.list',
  'GET /v1/ops/connectors/:connector_id': 'ops_connector.read',
  'PATCH /v1/ops/connectors/:connector_id': 'ops_connector.update',
  'POST /v1/ops/connectors/:connector_id/scan': 'ops_connector.scan',
  'POST /v1/ops/slos': 'ops_slo.create',
  'GET /v1/ops/slos': 'ops_slo.list',
  'GET /v1/ops/slos/:slo_id': 'ops_slo.read',
  'POST /v1/legal/matters': 'legal_matter.create',
  'GET /v1/legal/matters': 'legal_matter.list',
  'GET /v1/legal/matters/:matter_id': 'legal_matter.read',
  'PATCH /v1/legal/matters/:matter_id': 'legal_matter.update',
  'POST /v1/legal/matters/:matter_id/close': 'legal_matter.close',
  'POST /v1/legal/matters/:matter_id/contracts': 'legal_contract.create',
  'GET /v1/legal/matters/:matter_id/contracts': 'legal_contract.list',
  'GET /v1/legal/contracts/:contract_id': 'legal_contract.read',
  'GET /v1/legal/contracts/:contract_id/text': 'legal_contract.read',
  'POST /v1/legal/contracts/:contract_id/mappings': 'legal_mapping.create',
  'GET /v1/legal/contracts/:contract_id/mappings': 'legal_mapping.list',
  'GET /v1/legal/mappings/:mapping_id': 'legal_mapping.read',
  'POST /v1/legal/contracts/:contract_id/redlines': 'legal_redline.create',
  'GET /v1/legal/contracts/:contract_id/redlines': 'legal_redline.list',
  'GET /v1/legal/redlines/:redline_id': 'legal_redline.read',
  'POST /v1/dev/repositories': 'dev_repository.create',
  'GET /v1/dev/repositories': 'dev_repository.list',
  'GET /v1/dev/repositories/:repository_id': 'dev_repository.read',
  'PATCH /v1/dev/repositories/:repository_id': 'dev_repository.update',
  'POST /v1/dev/repositories/:repository_id/files': 'dev_repository.index',
  'GET /v1/dev/repositories/:repository_id/files': 'dev_repository.read',
  'POST /v1/dev/repositories/:repository_id/questions': 'dev_question.create',
  'POST /v1/dev/reviews': 'dev_review.create',
  'GET /v1/dev/reviews': 'dev_review.list',
  'GET /v1/dev/reviews/:review_id': 'dev_review.read',
  'POST /v1/dev/pull-requests/summaries': 'dev_pull_request_summary.create',
  'GET /v1/dev/pull-requests/summaries': 'dev_pull_request_summary.list',
  'GET /v1/dev/pull-requests/summaries/:summary_id': 'dev_pull_request_summary.read',
  'POST /v1/dev/tests': 'dev_test.create',
  'GET /v1/dev/tests': 'dev_test.list',
  'GET /v1/dev/tests/:test_id': 'dev_test.read',

  // GraphQL: each field names its own action (graphql/builder.ts scope-auth).
  'POST /v1/rag/documents': 'rag_document.create',
  'GET /v1/rag/documents': 'rag_document.list',
  'GET /v1/rag/documents/:document_id': 'rag_document.read',
  'DELETE /v1/rag/documents/:document_id': 'rag_document.delete',
  'POST /v1/rag/query': 'rag.query',
  'PUT /v1/projects/:project_id/rag': 'rag_settings.update',
  'GET /v1/projects/:project_id/rag': 'rag_settings.read',

  'GET /graphql': 'authenticated',
  'POST /graphql': 'authenticated',
  'OPTIONS /graphql': 'public',
  // GraphiQL's page (outside production); the queries it sends go to /graphql with the key typed into it.
  'GET /graphiql': 'public',

  // Operators of the admin console (issue 22). Sign-in routes check the console's IP allowlist and the session cookie
  // themselves (api/routes/sso.ts); SCIM checks its own bearer token (api/routes/scim.ts).
  'GET /auth/methods': 'public',
  'GET /auth/oidc/start': 'public',
  'GET /auth/oidc/callback': 'public',
  'GET /auth/saml/login': 'public',
  'POST /auth/saml/acs': 'public',
  'GET /auth/saml/metadata': 'public',
  'GET /auth/session': 'public',
  'POST /auth/sign-out': 'public',
  'GET /scim/v2/Users': 'public',
  'POST /scim/v2/Users': 'public',
  'GET /scim/v2/Users/:id': 'public',
  'PUT /scim/v2/Users/:id': 'public',
  'PATCH /scim/v2/Users/:id': 'public',
  'DELETE /scim/v2/Users/:id': 'public',
  'GET /scim/v2/Groups': 'public',
  'POST /scim/v2/Groups': 'public',
  'GET /scim/v2/Groups/:id': 'public',
  'PUT /scim/v2/Groups/:id': 'public',
  'PATCH /scim/v2/Groups/:id': 'public',
  'DELETE /scim/v2/Groups/:id': 'public',
  'GET /scim/v2/ServiceProviderConfig': 'public',
  'GET /scim/v2/ResourceTypes': 'public',
  'GET /scim/v2/Schemas': 'public',
  'GET /v1/operator-groups': 'operator_group.list',
  'PUT /v1/operator-groups/:group_id/roles': 'operator_group.roles_update',
  'GET /v1/projects/:project_id/ip-allowlist': 'ip_allowlist.read',
  'PUT /v1/projects/:project_id/ip-allowlist': 'ip_allowlist.update',
  // The gateway's description and instruments (src/observability): GET / (links), the OpenAPI document and its
  // reference page (static files of swagger-ui), /metrics (its own token or the operator key, checked by the route).
  'GET /': 'public',
  'GET /openapi.json': 'public',
  'GET /docs/api': 'public',
  'GET /docs/api/': 'public',
  'GET /docs/api/json': 'public',
  'GET /docs/api/yaml': 'public',
  'GET /docs/api/static/index.html': 'public',
  'GET /docs/api/static/swagger-initializer.js': 'public',
  'GET /docs/api/static/*': 'public',
  'GET /metrics': 'public',
};

/** Who may call a route, as the auth hook checks it: one scope, any one of several, any valid key, or no key. */
export type RouteAccess = Scope | readonly Scope[] | 'authenticated' | 'public';

function accessOf(action: RouteAction): RouteAccess {
  if (action === 'authenticated' || action === 'public') return action;
  const scopes = scopesFor(action);
  if (scopes.length === 0) return 'authenticated';
  // One scope stays a plain string: the rate limiter (api/hooks/rate-limit.ts) compares it with the caller's.
  return scopes.length === 1 ? scopes[0]! : scopes;
}

/** ROUTE_ACTIONS with each action's scopes from the table: what the auth hook and the rate limiter read. */
export const ROUTE_ACCESS: Record<string, RouteAccess> = Object.fromEntries(
  Object.entries(ROUTE_ACTIONS).map(([route, action]) => [route, accessOf(action)]),
);

/** The scope(s) a caller lacks for a route, as a refusal names them; null when its scopes allow the route. */
export function missingScope(access: RouteAccess, scopes: readonly Scope[]): string | null {
  if (access === 'authenticated' || access === 'public') return null;
  const needed: readonly Scope[] = typeof access === 'string' ? [access] : access;
  return needed.some((scope) => scopes.includes(scope)) ? null : scopeWords(needed);
}

export const routeKey = (method: string, url: string) => `${method} ${url}`;

export function accessFor(method: string, url: string | undefined): RouteAccess | undefined {
  if (url === undefined) return undefined;
  return ROUTE_ACCESS[routeKey(method === 'HEAD' ? 'GET' : method, url)];
}
