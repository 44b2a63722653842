/**
 * Every audit action the gateway writes, once: recordAudit and recordSystemAudit accept only these, so an action
 * cannot be written without appearing here, and GraphQL's `auditActions` (the console's filter) lists exactly them.
 * Spec §5 and §6.3 name the key.* actions and webhook.delivery.failed; the others follow CONTRACT part two
 * (`<resource>.<verb>`), except policy.updated, which shares the event's name (CONTRACT §7).
 */
export const AUDIT_ACTIONS = {
  'key.create': 'A key was created.',
  'key.list': 'Keys were listed (from the console: once per session and page).',
  'key.rotate': 'A key got a new secret.',
  'key.revoke': 'A key was revoked.',
  'project.create': 'A project was created.',
  'project.archive': 'A project was archived.',
  'policy.updated': 'Rate limits or a budget were changed.',
  'routing_policy.create': 'A routing policy was created.',
  'routing_policy.update': 'A routing policy was changed.',
  'routing_policy.delete': 'A routing policy was deleted.',
  'webhook.create': 'A webhook was created.',
  'webhook.disable': 'A webhook was disabled.',
  'webhook.delivery.replay': 'A failed delivery was replayed.',
  'webhook.delivery.failed': 'A delivery failed for 24 hours and stopped retrying.',
  'governance.update': 'The dual control list was changed.',
  'residency.update': 'The residency pin was set or lifted.',
  'pii.update': "The project's PII redaction default was set.",
  'retention.update': "The project's retention mode or period was set.",
  'approval.create': 'A guarded change was queued for a second key.',
  'approval.approve': 'A queued change was approved (and applied, or failed).',
  'approval.reject': 'A queued change was rejected.',
  'approval.expire': 'A queued change expired undecided after 24 hours.',
  // Operators of the admin console (CONTRACT §17): the actor is the operator (opr_…), or null when none was known.
  'operator.sign_in': 'An operator signed in to the console (OIDC or SAML).',
  'operator.sign_in_refused': 'A console sign-in was refused.',
  'operator.sign_out': 'A console session ended: signed out, timed out, or ended by deprovisioning.',
  'operator.request_refused': "A console session's request was refused (IP allowlist, CSRF).",
  'operator.create': 'SCIM provisioned an operator.',
  'operator.update': "SCIM changed an operator.",
  'operator.delete': 'SCIM deprovisioned an operator.',
  'operator_group.create': 'SCIM created an operator group.',
  'operator_group.update': "SCIM changed an operator group's name or members.",
  'operator_group.delete': 'SCIM deleted an operator group.',
  'operator_group.roles_update': "An operator group's roles per project were set.",
  'ip_allowlist.update': "A project's console IP allowlist was set.",
  'rag_document.create': 'A RAG document was uploaded.',
  'rag_document.delete': 'A RAG document and its chunks were deleted.',
  'rag_settings.update': "A project's RAG embedding model was set.",
  // Evaluation runs (CONTRACT §14).
  'eval_run.create': 'An evaluation run was created (queued for the background worker).',
  'eval_run.cancel': 'An evaluation run was canceled.',
  // Prompt templates (CONTRACT §10).
  'template.create': 'A prompt template was created (and its version 1 published).',
  'template.publish': 'A new version of a prompt template was published.',
  // The verticals (CONTRACT §16).
  'risk_case.create': 'A Risk case was opened.',
  'risk_case.update': "A Risk case's fields were changed.",
  'risk_case.close': 'A Risk case was closed with a disposition.',
  'risk_evidence.create': 'Evidence was uploaded to a Risk case (its SHA-256 fixed).',
  'risk_evidence.update': "A piece of evidence's metadata was changed.",
  'risk_assessment.create': 'A model-drafted Risk assessment was requested.',
  'risk_report.create': 'A model-drafted Risk report was requested.',
  'risk_report.approve': 'A Risk report was approved (through dual control).',
  'ops_incident.create': 'An Ops incident was opened.',
  'ops_incident.close': 'An Ops incident was closed.',
  'ops_timeline.create': "An entry was added to an incident's timeline.",
  'ops_logs.ingest': 'Log lines were ingested.',
  'ops_logs.query': 'Logs were queried (with a model summary).',
  'ops_postmortem.create': 'A model-drafted post-mortem was requested.',
  'ops_connector.create': 'An Ops connector was created.',
  'ops_connector.update': 'An Ops connector was changed (enabled, name).',
  'ops_connector.scan': 'An Ops connector was scanned.',
  'ops_slo.create': 'An SLO was defined.',
  'legal_matter.create': 'A Legal matter was opened.',
  'legal_matter.update': "A Legal matter's fields were changed.",
  'legal_matter.close': 'A Legal matter was closed (no more writes under it).',
  'legal_contract.create': 'A contract was added to a Legal matter (its text fixed, with its SHA-256).',
  'legal_mapping.create': 'A model mapping of a contract into named fields was requested.',
  'legal_redline.create': 'A model redline of a contract was requested.',
  'dev_repository.create': 'A Dev repository was created.',
  'dev_repository.update': "A Dev repository's fields were changed (comments_allowed, name, …).",
  'dev_repository.index': "Files of a Dev repository were posted for (re)indexing.",
  'dev_question.create': 'A question was asked about a Dev repository (answered by the model).',
  'dev_review.create': 'A model review of a diff was requested.',
  'dev_pull_request_summary.create': 'A model summary of a pull request was requested.',
  'dev_test.create': 'A model-generated test file was requested.',
} as const satisfies Record<string, string>;

export type AuditAction = keyof typeof AUDIT_ACTIONS;

/** In the table's order (by resource). */
export const AUDIT_ACTION_NAMES = Object.keys(AUDIT_ACTIONS) as AuditAction[];
