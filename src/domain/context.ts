import type { Logger } from 'pino';
import type { Redis } from 'ioredis';
import type { Config } from '../config/config.ts';
import type { Database, Db } from '../db/client.ts';
import type { Bus } from '../pubsub/bus.ts';
import type { WebhookRuntime } from './events/ports.ts';
import type { KeyCache } from './auth/key-cache.ts';
import type { Scope } from './keys/scopes.ts';
import type { ProviderRegistry } from '../providers/router.ts';
import type { ResponseCache } from './inference/cache.ts';
import type { Limiter } from '../limits/limiter.ts';
import type { ProjectCache } from './projects/cache.ts';
import type { SpendCounters } from './budgets/counters.ts';
import type { OutcomeQueue } from './usage/ports.ts';
import type { BudgetAlertSender } from './budgets/ports.ts';
import type { Clock } from '../kernel/clock.ts';

// The clock lives in the kernel (every layer may import it); re-exported for the importers of this module.
export { systemClock, type Clock } from '../kernel/clock.ts';

/** Who is calling: the operator (SVC_MASTER_KEY) or a project key. */
export interface Caller {
  kind: 'operator' | 'key';
  /** `key_master` for the operator. */
  keyId: string;
  /** The key's project; null for the operator. */
  projectId: string | null;
  scopes: readonly Scope[];
  /** The key's monthly budget in micro-dollars (null: none; the operator has none). */
  budgetMicros?: bigint | null;
}

/** Process-wide dependencies, built once at start (src/app-deps.ts) and shared by every request. */
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
  /** Month-to-date spend per budget scope, read and added on the request path without SQL (Redis, or in process). */
  spendCounters: SpendCounters;
  /** Usage records and inference.completed events, written off the request path in batches (src/jobs/outcomes). */
  outcomes: OutcomeQueue;
  /** The budget alert e-mails, sent after the batch that fired them commits (src/jobs/budget-alerts). */
  budgetAlerts: BudgetAlertSender;
}

/** One per request: REST puts it on `req.ctx`, GraphQL on `{ ctx }`. */
export interface Ctx {
  deps: Deps;
  db: Db;
  requestId: string;
  caller: Caller;
  ip: string | null;
  /** The X-Svc-Project header, if sent. */
  headerProjectId: string | null;
  /** REST: the `project_id` of the query or body, if sent; every route takes it (CONTRACT §2, §3). */
  namedProjectId: string | null;
  /** The project the call turned out to address (for the operator's identity header); set only by tenancy.ts addressed(). */
  projectId: string | null;
  now(): Date;
}

export function makeCtx(deps: Deps, init: { requestId: string; caller: Caller; ip: string | null; headerProjectId: string | null }): Ctx {
  return {
    deps,
    db: deps.db,
    namedProjectId: null,
    ...init,
    projectId: init.caller.projectId,
    now: () => new Date(deps.clock.now()),
  };
}

export const unixSeconds = (d: Date): number => Math.floor(d.getTime() / 1000);
export const unixOrNull = (d: Date | null | undefined): number | null => (d ? unixSeconds(d) : null);
