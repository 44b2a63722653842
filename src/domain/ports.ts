import type { AuditPorts } from './audit/ports.ts';
import type { AuthPorts } from './auth/ports.ts';
import type { BudgetPorts } from './budgets/ports.ts';
import type { InferencePorts } from './inference/ports.ts';
import type { KeyPorts } from './keys/ports.ts';
import type { ProjectPorts } from './projects/ports.ts';
import type { RateLimitPorts } from './rate-limits/ports.ts';
import type { RoutingPorts } from './routing/ports.ts';
import type { UsagePorts } from './usage/ports.ts';
import type { WebhookPorts } from './webhooks/ports.ts';
import type { OperatorPorts } from './operators/ports.ts';
import type { RagPorts } from './rag/ports.ts';
import type { PrivacyPorts } from './privacy/ports.ts';
import type { TemplatePorts } from './templates/ports.ts';
import type { DevPorts } from './dev/ports.ts';
import type { McpPorts } from './mcp/ports.ts';
import type { CustomerPorts } from './customers/ports.ts';

/**
 * Every capability's ports, composed once in src/app-deps.ts and handed to the adapters (REST: `app.ports`, GraphQL:
 * the context's `ports`). A service that needs something from outside the domain takes its capability's bundle as
 * its first argument; the others take only the request's `Ctx`.
 */
export interface DomainPorts {
  auth: AuthPorts;
  keys: KeyPorts;
  projects: ProjectPorts;
  routing: RoutingPorts;
  rateLimits: RateLimitPorts;
  budgets: BudgetPorts;
  usage: UsagePorts;
  audit: AuditPorts;
  inference: InferencePorts;
  webhooks: WebhookPorts;
  operators: OperatorPorts;
  rag: RagPorts;
  privacy: PrivacyPorts;
  templates: TemplatePorts;
  dev: DevPorts;
  mcp: McpPorts;
  customers: CustomerPorts;
}
