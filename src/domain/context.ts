import type { Db, Tx } from '../db/client.ts';
import type { Scope } from './keys/scopes.ts';
import type { Clock } from '../kernel/clock.ts';

// The clock lives in the kernel (every layer may import it); re-exported for the importers of this module.
export { systemClock, type Clock } from '../kernel/clock.ts';

/** Who is calling: the operator (SVC_MASTER_KEY), a project key, or a person signed in to the console (issue 22). */
export interface Caller {
  kind: 'operator' | 'key' | 'session';
  /** `key_master` for the operator; the operator's `opr_…` id for a console session. */
  keyId: string;
  /** The key's project; null for the operator. */
  projectId: string | null;
  scopes: readonly Scope[];
  /** The key's monthly budget in micro-dollars (null: none; the operator has none). */
  budgetMicros?: bigint | null;
  /** CONTRACT §22: the key's model list (domain/auth/actions.ts); null or absent: every model. */
  models?: readonly string[] | null;
  /** Kind `session`: the signed-in operator (domain/operators). Its projectId is the project the request addresses. */
  session?: OperatorSession;
}

/** A console session's caller: who, how it signed in, and its role in each project its groups reach. */
export interface OperatorSession {
  operatorId: string;
  userName: string;
  sessionId: string;
  method: string;
  /** The absolute timeout (ms since the epoch). */
  expiresAt: number;
  /** The role in the addressed project; unbound (several projects, none named): the weakest of its roles. */
  role: 'viewer' | 'admin' | null;
  projects: ReadonlyMap<string, 'viewer' | 'admin'>;
  /**
   * Those of its projects whose console IP allowlist excludes this request's address (tenancy.ts refuses them: 403).
   * Absent for a session acting without a request of its own (an approved change applied as its requester).
   */
  ipRefused?: ReadonlySet<string>;
}

/**
 * Where a request names a project (CONTRACT §2, §3), apart from a service's own argument (a REST path id, GraphQL's
 * projectId): the REST query's and body's `project_id` and the X-Svc-Project header. Null: not named there.
 */
export interface ProjectNames {
  readonly query: string | null;
  readonly body: string | null;
  readonly header: string | null;
}

/** A request that names no project (yet: the edge resolves it before validation). */
export const NO_PROJECT_NAMES: ProjectNames = Object.freeze({ query: null, body: null, header: null });

/** Names given as a header only: background work acting in one project, the console's X-Svc-Project. */
export const headerNames = (header: string | null): ProjectNames => Object.freeze({ query: null, body: null, header });

/** One per request: REST puts it on `req.ctx`, GraphQL on `{ ctx }`. */
export interface Ctx {
  /** The database handle the request's queries go through. */
  db: Db;
  requestId: string;
  caller: Caller;
  ip: string | null;
  /**
   * The projects the request names, read once at the edge (api/hooks/auth.ts, registerProjectNames) and frozen: what tenancy, idempotency
   * and governance read. Services still check that an id belongs to the project they resolve (domain/tenancy.ts).
   */
  project: ProjectNames;
  /** The project the call turned out to address (for the operator's identity header); set only by tenancy.ts addressed(). */
  projectId: string | null;
  /** The X-Svc-Customer header as sent (CONTRACT §22: the end customer, on any inbound route); validated by inference. */
  customerHeader?: string;
  /** Set by inference on a zero-retention project (CONTRACT §12): no content of the answer may be kept. */
  zeroRetention?: boolean;
  /**
   * The request's marks for its usage record's timings (domain/inference/tracker.ts): performance.now() when the auth hook
   * began and ended. Absent for work without a request of its own.
   */
  startedAt?: number;
  authenticatedAt?: number;
  /** The trace the gateway exports the request's spans under (observability/tracing.ts); absent when not traced. */
  traceId?: string;
  /** The caller's `traceparent` header as sent (parsed only when an inference records it: tracker.ts traceIdOf). */
  traceparent?: string;
  now(): Date;
}

export function makeCtx(
  env: { db: Db; clock: Clock },
  init: { requestId: string; caller: Caller; ip: string | null; project: ProjectNames },
): Ctx {
  const { clock } = env;
  return {
    db: env.db,
    ...init,
    projectId: init.caller.projectId,
    now: () => new Date(clock.now()),
  };
}

/**
 * How a guarded service's apply step opens its transaction. Called directly, it is the request's own
 * (`ownTransaction(ctx)`); when an approval applies the change (domain/governance/approvals.ts), it is one that claims
 * the approval first and records the result's id last, so the change and the decision commit together. An apply that
 * changes nothing (disabling a disabled webhook) does not call it.
 */
export type Transact = <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>;

export const ownTransaction =
  (ctx: Ctx): Transact =>
  (fn) =>
    ctx.db.$transaction(fn);

/** What a guarded service's check step yields: the project the change addresses, and what apply needs. */
export interface Checked {
  projectId: string;
}

export const unixSeconds = (d: Date): number => Math.floor(d.getTime() / 1000);
export const unixOrNull = (d: Date | null | undefined): number | null => (d ? unixSeconds(d) : null);
