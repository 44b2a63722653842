/**
 * Every row of the spec's error table (§7), defined once. Nothing else defines an error code: the REST error handler,
 * the GraphQL error mapper and the /docs/errors page all read this table.
 */
export const ERRORS = {
  invalid_request: { http: 400, retryable: 'no', message: 'The request is malformed or has an invalid value.' },
  missing_project_id: { http: 400, retryable: 'no', message: 'project_id is missing from the body and the X-Svc-Project header.' },
  template_variable_missing: { http: 400, retryable: 'no', message: 'A required template variable is absent.' },
  invalid_api_key: { http: 401, retryable: 'no', message: 'The API key is missing, revoked, expired or malformed.' },
  insufficient_scope: { http: 403, retryable: 'no', message: 'The API key lacks the scope this request requires.' },
  project_archived: { http: 403, retryable: 'no', message: 'The project is archived and no longer accepts inference.' },
  residency_violation: { http: 403, retryable: 'no', message: "The request's region conflicts with the project's pinned region." },
  dual_control_required: { http: 403, retryable: 'no', message: 'The mutation is queued for a second approver.' },
  connector_disabled: { http: 403, retryable: 'no', message: 'The connector is disabled.' },
  zero_retention: { http: 403, retryable: 'no', message: 'The project keeps no content (zero retention): files cannot be stored.' },
  git_host_forbidden: { http: 403, retryable: 'no', message: 'The Git app cannot comment on this host.' },
  not_found: { http: 404, retryable: 'no', message: 'No such object.' },
  record_not_retained: { http: 404, retryable: 'no', message: 'The record was not retained or its retention period has expired.' },
  routing_timeout: { http: 408, retryable: 'yes', message: 'The model provider hops exceeded the routing timeout.' },
  idempotency_conflict: { http: 409, retryable: 'no', message: 'This Idempotency-Key was already used with a different request.' },
  key_name_conflict: { http: 409, retryable: 'no', message: 'A key with this name already exists in the project.' },
  template_version_conflict: { http: 409, retryable: 'no', message: 'This template version is already published.' },
  repository_not_indexed: { http: 409, retryable: 'no', message: 'The repository index is not ready.' },
  diff_too_large: { http: 409, retryable: 'no', message: 'The review diff is over the size cap.' },
  matter_closed: { http: 409, retryable: 'no', message: 'The matter is closed.' },
  query_window_too_large: { http: 409, retryable: 'no', message: 'The log query window is over the cap.' },
  segregation_of_duties: { http: 409, retryable: 'no', message: 'The assignee cannot also be the reviewer.' },
  evidence_immutable: { http: 409, retryable: 'no', message: 'Evidence bytes cannot be changed.' },
  document_too_large: { http: 413, retryable: 'no', message: 'The document exceeds the upload limit of the tier.' },
  structured_output_failed: { http: 422, retryable: 'no', message: 'The output did not match the schema after retries.' },
  pii_redaction_failed: { http: 422, retryable: 'maybe', message: 'The redaction engine timed out.' },
  rate_limit_exceeded: { http: 429, retryable: 'yes', message: 'Rate limit exceeded: the request or token window is exhausted.' },
  budget_exceeded: { http: 429, retryable: 'no', message: 'The monthly budget is exhausted.' },
  internal_error: { http: 500, retryable: 'yes', message: 'An unexpected error occurred in the gateway.' },
  model_unavailable: { http: 503, retryable: 'yes', message: 'No healthy model provider is available.' },
  cache_unavailable: { http: 503, retryable: 'no retry needed', message: 'The response cache is unavailable; the request proceeds uncached.' },
} as const satisfies Record<string, { http: number; retryable: string; message: string }>;

export type ErrorCode = keyof typeof ERRORS;

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ERRORS, value);
}
