import type { Logger } from 'pino';
import type { Redis } from './redis/connection.ts';
import type { Config } from './config/config.ts';
import type { Database, Db } from './db/client.ts';
import type { Bus } from './pubsub/bus.ts';
import type { WebhookRuntime } from './domain/events/ports.ts';
import type { KeyCache } from './domain/auth/service.ts';
import type { ProviderRegistry } from './providers/router.ts';
import type { ResponseCache } from './domain/inference/cache.ts';
import type { Limiter } from './limits/limiter.ts';
import type { ProjectCache } from './domain/projects/cache.ts';
import type { CustomerCache } from './domain/customers/cache.ts';
import type { TemplateCache } from './domain/templates/cache.ts';
import type { SpendCounters } from './domain/budgets/counters.ts';
import type { OutcomeQueue } from './domain/usage/ports.ts';
import type { BudgetAlertSender } from './domain/budgets/ports.ts';
import type { DomainPorts } from './domain/ports.ts';
import type { Clock } from './kernel/clock.ts';
import type { SessionStore } from './domain/operators/session-store.ts';
import type { Observability } from './observability/index.ts';

/**
 * The composition root's own record (src/app-deps.ts): every process-wide piece, built once, which main.ts, the app
 * and the jobs start and stop. No domain service takes it: services take their capability's ports (`ports`).
 */
export interface Deps {
  config: Readonly<Config>;
  database: Database;
  db: Db;
  clock: Clock;
  log: Logger;
  redis: Redis | null;
  /** SHA-256 hex of the operator key. */
  masterKeyHash: string;
  /** Cross-replica notifications (Redis pub/sub, or in process). */
  bus: Bus;
  keyCache: KeyCache;
  /** Signing-secret encryption, egress guard and the delivery worker (started by main.ts). */
  webhooks: WebhookRuntime;
  /** Model providers, their routes and circuit breakers (src/providers). */
  providers: ProviderRegistry;
  /** The inference response cache (Redis, or in process). */
  responseCache: ResponseCache;
  /** Request and token windows per key and project (src/limits): Redis, or in process. */
  limiter: Limiter;
  /** Project rows and default routing policies, cached in process; evicted over the bus on every change. */
  projectCache: ProjectCache;
  /** End customers' bounds (CONTRACT §22), cached in process; evicted over the bus on every change. */
  customerCache: CustomerCache;
  templateCache: TemplateCache;
  /** Month-to-date spend per budget scope, read and added on the request path without SQL (Redis, or in process). */
  spendCounters: SpendCounters;
  /** Usage records and inference.completed events, written off the request path in batches (src/jobs/outcomes). */
  outcomes: OutcomeQueue;
  /** The budget alert e-mails, sent after the batch that fired them commits (src/jobs/budget-alerts). */
  budgetAlerts: BudgetAlertSender;
  /** Console sessions of operators (issue 22): Redis, or the database. */
  operatorSessions: SessionStore;
  /** Each capability's ports, composed from the pieces above (composePorts in app-deps.ts). */
  ports: DomainPorts;
  /** Metrics and traces (src/observability): what is off costs nothing on the request path. */
  observability: Observability;
}
