import * as budgets from '../budgets/service.ts';
import * as keys from '../keys/service.ts';
import * as rateLimits from '../rate-limits/service.ts';
import * as routing from '../routing/service.ts';
import * as webhooks from '../webhooks/service.ts';
import * as privacy from '../privacy/settings.ts';
import * as policy from './policy.ts';
import * as risk from '../risk/service.ts';
import { governed } from './guard.ts';

/**
 * The guarded mutations, as both adapters bind them (rest/*.ts and graphql/*.ts import these instead of the plain
 * service functions): each line is the service, the DomainPorts bundle it takes (or null), and the names of its id
 * arguments. A new guarded action (retention, pii): its row in GUARDED_ACTIONS (domain/auth/actions.ts) and one line
 * here, e.g. `export const updateRetention = governed('retention.update', 'retention', retention.updateRetention, ['project_id']);`.
 */
export const updateRateLimits = governed('rate_limits.update', 'rateLimits', rateLimits.updateRateLimits, ['project_id']);
export const updateBudget = governed('budget.update', 'budgets', budgets.updateBudget, ['project_id']);
export const createRoutingPolicy = governed('routing_policy.create', 'routing', routing.createRoutingPolicy);
export const updateRoutingPolicy = governed('routing_policy.update', 'routing', routing.updateRoutingPolicy, ['policy_id']);
export const deleteRoutingPolicy = governed('routing_policy.delete', 'routing', routing.deleteRoutingPolicy, ['policy_id']);
export const createWebhook = governed('webhook.create', 'webhooks', webhooks.createWebhook);
export const disableWebhook = governed('webhook.disable', null, webhooks.disableWebhook, ['webhook_id']);
export const replayDelivery = governed('webhook.delivery.replay', null, webhooks.replayDelivery, ['webhook_id', 'delivery_id']);
export const createKey = governed('key.create', null, keys.createKey);
export const rotateKey = governed('key.rotate', 'keys', keys.rotateKey, ['key_id']);
export const revokeKey = governed('key.revoke', 'keys', keys.revokeKey, ['key_id']);
export const setResidency = governed('residency.update', 'projects', policy.setResidency, ['project_id']);
export const setProjectPii = governed('pii.update', 'projects', privacy.setProjectPii, ['project_id']);
export const setProjectRetention = governed('retention.update', 'projects', privacy.setProjectRetention, ['project_id']);
export const setGovernancePolicy = governed('governance.update', null, policy.setGovernancePolicy, ['project_id']);

// CONTRACT §16: always guarded (ALWAYS_GUARDED), whatever the project's dual control list says.
export const approveRiskReport = governed('risk_report.approve', null, risk.approveRiskReport, ['report_id']);

export { registeredCall } from './guard.ts';
