import * as budgets from '../budgets/service.ts';
import * as keys from '../keys/service.ts';
import * as keyUpdates from '../keys/update.ts';
import * as rateLimits from '../rate-limits/service.ts';
import * as customers from '../customers/service.ts';
import * as routing from '../routing/service.ts';
import * as webhooks from '../webhooks/service.ts';
import * as mcp from '../mcp/service.ts';
import * as privacy from '../privacy/settings.ts';
import * as policy from './policy.ts';
import * as risk from '../risk/service.ts';
import { governed } from './guard.ts';

/**
 * The guarded mutations, as both adapters bind them (rest/*.ts and graphql/*.ts import these instead of the plain
 * service functions), with the same arguments as the plain function: each line is the DomainPorts bundle the service
 * takes (or null), the names of its id arguments, and its two steps, check (validation, no writes) and apply. A new
 * guarded action: its row in GUARDED_ACTIONS (domain/auth/actions.ts), its check and apply beside its service, and
 * one line here.
 */
export const updateRateLimits = governed('rate_limits.update', 'rateLimits', ['project_id'], rateLimits.checkRateLimits, rateLimits.applyRateLimits);
export const updateBudget = governed('budget.update', 'budgets', ['project_id'], budgets.checkBudget, budgets.applyBudget);
// CONTRACT §22: a customer's bounds are guarded with the project's (`budget`, `rate_limits`).
export const updateCustomerBudget = governed('customer.budget.update', 'customers', ['project_id', 'customer'], customers.checkCustomerBudget, customers.applyCustomerBudget);
export const updateCustomerRateLimits = governed(
  'customer.rate_limits.update',
  'customers',
  ['project_id', 'customer'],
  customers.checkCustomerRateLimits,
  customers.applyCustomerRateLimits,
);
export const createRoutingPolicy = governed('routing_policy.create', 'routing', [], routing.checkCreateRoutingPolicy, routing.applyCreateRoutingPolicy);
export const updateRoutingPolicy = governed('routing_policy.update', 'routing', ['policy_id'], routing.checkUpdateRoutingPolicy, routing.applyUpdateRoutingPolicy);
export const deleteRoutingPolicy = governed('routing_policy.delete', 'routing', ['policy_id'], routing.checkDeleteRoutingPolicy, routing.applyDeleteRoutingPolicy);
export const createWebhook = governed('webhook.create', 'webhooks', [], webhooks.checkCreateWebhook, webhooks.applyCreateWebhook);
export const disableWebhook = governed('webhook.disable', null, ['webhook_id'], webhooks.checkDisableWebhook, webhooks.applyDisableWebhook);
export const replayDelivery = governed('webhook.delivery.replay', null, ['webhook_id', 'delivery_id'], webhooks.checkReplayDelivery, webhooks.applyReplayDelivery);
export const createMcpServer = governed('mcp_server.create', 'mcp', [], mcp.checkCreateMcpServer, mcp.applyCreateMcpServer);
export const createKey = governed('key.create', null, [], keys.checkCreateKey, keys.applyCreateKey);
export const rotateKey = governed('key.rotate', 'keys', ['key_id'], keys.checkRotateKey, keys.applyRotateKey);
export const revokeKey = governed('key.revoke', 'keys', ['key_id'], keys.checkRevokeKey, keys.applyRevokeKey);
export const updateKey = governed('key.update', 'keys', ['key_id'], keyUpdates.checkUpdateKey, keyUpdates.applyUpdateKey);
export const setResidency = governed('residency.update', 'projects', ['project_id'], policy.checkResidency, policy.applyResidency);
export const setProjectPii = governed('pii.update', 'projects', ['project_id'], privacy.checkProjectPii, privacy.applyProjectPii);
export const setProjectRetention = governed('retention.update', 'projects', ['project_id'], privacy.checkProjectRetention, privacy.applyProjectRetention);
export const setGovernancePolicy = governed('governance.update', null, ['project_id'], policy.checkGovernancePolicy, policy.applyGovernancePolicy);

// CONTRACT §16: always guarded (ALWAYS_GUARDED), whatever the project's dual control list says.
export const approveRiskReport = governed('risk_report.approve', null, ['report_id'], risk.checkRiskReportApproval, risk.applyRiskReportApproval);

export { registeredCall } from './guard.ts';
