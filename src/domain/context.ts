import type { Db, Tx } from '../db/client.ts';
import type { Scope } from './keys/scopes.ts';
import type { Clock } from '../kernel/clock.ts';
import { SvcError, invalid } from '../errors/svc-error.ts';
import { PROJECT_IP_NOT_ALLOWED, refuseProjectAddress } from './operators/audit.ts';

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
   * Those of its projects whose console IP allowlist excludes this request's address (tenancy below refuses them: 403).
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
   * and governance read. Services still check that an id belongs to the project they resolve (tenancy, below).
   */
  project: ProjectNames;
  /** The project the call turned out to address (for the operator's identity header); set only by addressed() (tenancy, below). */
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

// ---- tenancy ----

/**
 * Tenancy: which project a request addresses, decided here and nowhere else (CONTRACT §2, §3). A request names a
 * project in up to three places, read in this order: the call's own argument (a REST path id, GraphQL's projectId),
 * the REST query or body `project_id`, the X-Svc-Project header. A key naming any project but its own gets 404 (never
 * reveal that it exists); the operator naming different projects is ambiguous: 400. The idempotency hook scopes keys
 * with the same order (idempotencyScope). A console session is also held to the console IP allowlist of every project
 * it names, wherever it names it (assertSessionAddress). Imports no service: audit and every other service import this module.
 */

const notFound = (param = 'project_id') => new SvcError('not_found', { param, message: 'No such project.' });

/** The `project_id` of a query or JSON body, when it is a non-empty string. */
export function projectIdOf(value: unknown): string | null {
  const id = (value as { project_id?: unknown } | null | undefined)?.project_id;
  return typeof id === 'string' && id !== '' ? id : null;
}

/**
 * The projects a REST request names (its query's and body's `project_id`, X-Svc-Project), read once by the edge before
 * validation (api/hooks/auth.ts, registerProjectNames) and frozen into `ctx.project`. Refuses nothing: a body that is not an object
 * names no project, and validation answers for it.
 */
export function readProjectNames(query: unknown, body: unknown, header: unknown): ProjectNames {
  return Object.freeze({ query: projectIdOf(query), body: projectIdOf(body), header: typeof header === 'string' && header !== '' ? header : null });
}

/** REST, once the request is valid: the query and the body naming different projects is 400. */
export function assertOneNamedProject(names: ProjectNames): void {
  if (names.query && names.body && names.query !== names.body) {
    throw invalid('project_id', 'The query and the body name different projects; send project_id once.');
  }
}

/** The names, in the one order: the call's own argument, the query/body project_id, the X-Svc-Project header. */
function namesOf(requested: string | null | undefined, names: ProjectNames): string[] {
  return [requested, names.body ?? names.query, names.header].filter((p): p is string => typeof p === 'string' && p !== '');
}

function addressedProject(ctx: Ctx, requested: string | null | undefined): string | null {
  const named = namesOf(requested, ctx.project);
  if (ctx.caller.kind === 'key' && named.some((p) => p !== ctx.caller.projectId)) throw notFound();
  if (ctx.caller.kind === 'session') assertSessionProjects(ctx.caller, named);
  if (named.some((p) => p !== named[0])) {
    throw invalid('project_id', 'project_id and the X-Svc-Project header name different projects; send one, or the same in both.');
  }
  return named[0] ?? null;
}

/**
 * A console session (issue 22) sees only its groups' projects (another is 404, as for a key); one that addresses a
 * project (X-Svc-Project, or its only project) sees only that one, with that project's role. A project whose console IP
 * allowlist excludes the request's address is 403, however it was named: the async entry points have audited that
 * refusal already (assertSessionAddress); this is the backstop of the synchronous ones.
 */
function assertSessionProjects(caller: Caller, named: string[]): void {
  if (ipRefusedOf(caller, named)) throw new SvcError('insufficient_scope', { message: PROJECT_IP_NOT_ALLOWED });
  const projects = caller.session?.projects;
  if (named.some((p) => !projects?.has(p) || (caller.projectId !== null && p !== caller.projectId))) throw notFound();
}

/** The first of the named projects a console session may not address from this request's address, if any. */
function ipRefusedOf(caller: Caller, named: readonly string[]): string | undefined {
  const refused = caller.kind === 'session' ? caller.session?.ipRefused : undefined;
  return refused && refused.size > 0 ? named.find((p) => refused.has(p)) : undefined;
}

/**
 * CONTRACT §17: a console session is refused a project whose console IP allowlist excludes the request's address, and
 * not only when the header, the path or the query names it (session.ts checks those before the route runs) but also
 * the body or a GraphQL argument: 403 insufficient_scope, audited as operator.request_refused. The one place every
 * way of addressing a project goes through.
 */
async function assertSessionAddress(ctx: Ctx, named: readonly string[]): Promise<void> {
  const session = ctx.caller.session;
  const refused = ipRefusedOf(ctx.caller, named);
  if (!refused || !session) return;
  throw await refuseProjectAddress(ctx.db, ctx, ctx.now().getTime(), session, refused);
}

/** A session reaching several projects names one per request (the console sends X-Svc-Project). */
const sessionWithoutProject = () =>
  new SvcError('missing_project_id', {
    param: 'project_id',
    message: "This operator's groups reach several projects: name one with the X-Svc-Project header or project_id.",
  });

/**
 * The one place that records which project a call addressed (the operator's X-Svc-Project identity header, the
 * operator's token windows). Returns the project, so a service can write `return addressed(ctx, row.projectId)`-style.
 */
export function addressed(ctx: Ctx, projectId: string): string {
  ctx.projectId = projectId;
  return projectId;
}

/** The project exists (for a key, addressedProject already made sure it is its own). */
async function assertVisible(ctx: Ctx, projectId: string): Promise<void> {
  if (ctx.caller.kind === 'key' || ctx.caller.kind === 'session') return;
  const found = await ctx.db.project.findUnique({ where: { id: projectId }, select: { id: true } });
  if (!found) throw notFound();
}

/**
 * The project a write addresses: the service's argument, body/query `project_id`, else the X-Svc-Project header;
 * missing is 400 missing_project_id. A key that names another project gets 404 (never reveal that it exists).
 */
export async function requireProjectId(ctx: Ctx, requested: string | null | undefined): Promise<string> {
  await assertSessionAddress(ctx, namesOf(requested, ctx.project));
  const projectId = addressedProject(ctx, requested);
  if (!projectId) throw new SvcError('missing_project_id', { param: 'project_id' });
  await assertVisible(ctx, projectId);
  return addressed(ctx, projectId);
}

/** The project filter of a read: a key sees only its own project; the operator all, or the one it names. */
export async function visibleProjectId(ctx: Ctx, requested: string | null | undefined): Promise<string | undefined> {
  await assertSessionAddress(ctx, namesOf(requested, ctx.project));
  const projectId = addressedProject(ctx, requested);
  // A key naming another project was refused there: it reads its own.
  if (ctx.caller.kind === 'key') return ctx.caller.projectId!;
  if (ctx.caller.kind === 'session') {
    const own = projectId ?? ctx.caller.projectId;
    if (!own) throw sessionWithoutProject();
    return addressed(ctx, own);
  }
  if (!projectId) return undefined;
  await assertVisible(ctx, projectId);
  return addressed(ctx, projectId);
}

/**
 * A path that is itself a project (`/v1/projects/{id}`): a key naming another project gets 404 with the path's
 * `param` ('id'); the query/body project_id and X-Svc-Project must agree with the path (else 404 project_id for a
 * key, 400 for the operator). Existence is the caller's to check (it reads the row anyway).
 */
export function assertPathProject(ctx: Ctx, projectId: string, param = 'id'): void {
  if (ctx.caller.kind === 'key' && projectId !== ctx.caller.projectId) throw notFound(param);
  if (ctx.caller.kind === 'session') {
    try {
      assertSessionProjects(ctx.caller, [projectId]);
    } catch (err) {
      if (err instanceof SvcError && err.code === 'insufficient_scope') throw err;
      throw notFound(param);
    }
  }
  addressedProject(ctx, projectId);
}

/** assertPathProject, with a console session's IP-allowlist refusal audited: the one to use in an async service. */
export async function requirePathProject(ctx: Ctx, projectId: string, param = 'id'): Promise<void> {
  await assertSessionAddress(ctx, namesOf(projectId, ctx.project));
  assertPathProject(ctx, projectId, param);
}

/**
 * The namespace of an Idempotency-Key (CONTRACT §5: the project), resolved before the handler runs and without
 * refusing anything (the service refuses what is wrong, and that answer is what gets stored): a key's own project;
 * for the operator, the first project the request names, in the order above; else its key id.
 */
export function idempotencyScope(caller: Caller, requested: string | null, names: ProjectNames): string {
  if (caller.projectId) return caller.projectId;
  return namesOf(requested, names)[0] ?? caller.keyId;
}
