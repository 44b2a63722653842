import type { ScreenProps } from './viewer.ts';
import { ApprovalsScreen } from './screens/approvals.ts';
import { AuditScreen } from './screens/audit.ts';
import { BatchesScreen } from './screens/batches.ts';
import { DevScreen } from './screens/dev.ts';
import { DocumentsScreen } from './screens/documents.ts';
import { EvalsScreen } from './screens/evals.ts';
import { KeysScreen } from './screens/keys.ts';
import { LegalScreen } from './screens/legal.ts';
import { LimitsScreen } from './screens/limits.ts';
import { McpScreen } from './screens/mcp.ts';
import { OpsScreen } from './screens/ops.ts';
import { OverviewScreen } from './screens/overview.ts';
import { PrivacyScreen } from './screens/privacy.ts';
import { RequestsScreen } from './screens/requests.ts';
import { RiskScreen } from './screens/risk.ts';
import { SpendScreen } from './screens/spend.ts';
import { TemplatesScreen } from './screens/templates.ts';
import { WebhooksScreen } from './screens/webhooks.ts';
import { PlaygroundScreen } from './screens/playground.ts';
import { ModelsScreen } from './screens/models.ts';
import { BudgetsScreen } from './screens/budgets.ts';
import { CustomersScreen } from './screens/customers.ts';
import { OperatorsScreen } from './screens/operators.ts';

/** The left navigation's groups, in the order shown. */
export const AREAS = ['Traffic', 'Access', 'Models', 'Governance', 'Verticals'] as const;
export type Area = (typeof AREAS)[number];

export interface Screen {
  area: Area;
  /** The hash route: #/<path>. */
  path: string;
  title: string;
  /**
   * The actions the screen shows: any one of their scopes (the API's catalog says which) shows the screen; [] any key.
   * A screen the caller cannot use is not in the navigation.
   */
  actions: string[];
  view: (props: ScreenProps) => unknown;
}

/**
 * Every screen of the console, one line each, in navigation order within its area. A new screen is a file in
 * screens/ and one line here.
 */
export const SCREENS: Screen[] = [
  { area: 'Traffic', path: 'overview', title: 'Overview', actions: [], view: OverviewScreen },
  { area: 'Traffic', path: 'requests', title: 'Requests', actions: ['usage.read'], view: RequestsScreen },
  { area: 'Traffic', path: 'spend', title: 'Spend', actions: ['usage.read'], view: SpendScreen },
  { area: 'Traffic', path: 'playground', title: 'Playground', actions: ['inference.create'], view: PlaygroundScreen },
  { area: 'Traffic', path: 'batches', title: 'Batches', actions: ['batch.list'], view: BatchesScreen },
  { area: 'Access', path: 'keys', title: 'Keys', actions: ['key.list'], view: KeysScreen },
  { area: 'Access', path: 'customers', title: 'Customers', actions: ['customer.list'], view: CustomersScreen },
  // The project's console allowlist needs governance:manage; the operators and the SSO settings, the operator key.
  { area: 'Access', path: 'operators', title: 'SSO and operators', actions: ['ip_allowlist.read'], view: OperatorsScreen },
  { area: 'Models', path: 'models', title: 'Providers and models', actions: ['provider.list'], view: ModelsScreen },
  { area: 'Models', path: 'templates', title: 'Templates', actions: ['template.list'], view: TemplatesScreen },
  { area: 'Models', path: 'evals', title: 'Evals', actions: ['eval_run.list'], view: EvalsScreen },
  { area: 'Models', path: 'documents', title: 'Documents', actions: ['rag_document.list'], view: DocumentsScreen },
  { area: 'Models', path: 'mcp', title: 'MCP servers', actions: ['mcp_server.list'], view: McpScreen },
  { area: 'Governance', path: 'approvals', title: 'Approvals', actions: ['approval.list'], view: ApprovalsScreen },
  { area: 'Governance', path: 'audit', title: 'Audit log', actions: ['audit.read'], view: AuditScreen },
  { area: 'Governance', path: 'webhooks', title: 'Webhooks', actions: ['webhook.list'], view: WebhooksScreen },
  { area: 'Governance', path: 'privacy', title: 'Privacy', actions: ['privacy.read', 'inference.read'], view: PrivacyScreen },
  { area: 'Governance', path: 'budgets', title: 'Budgets', actions: ['budget.read', 'key.update'], view: BudgetsScreen },
  { area: 'Governance', path: 'limits', title: 'Rate limits', actions: ['rate_limits.read'], view: LimitsScreen },
  { area: 'Verticals', path: 'risk', title: 'Risk', actions: ['risk_case.list'], view: RiskScreen },
  { area: 'Verticals', path: 'ops', title: 'Ops', actions: ['ops_incident.list'], view: OpsScreen },
  { area: 'Verticals', path: 'legal', title: 'Legal', actions: ['legal_matter.list'], view: LegalScreen },
  { area: 'Verticals', path: 'dev', title: 'Dev', actions: ['dev_repository.list'], view: DevScreen },
];
