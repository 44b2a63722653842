import type { Approval, Prisma } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { ALWAYS_GUARDED, GUARDED_ACTIONS, type Action, type AlwaysGuarded, type GuardedResource } from '../auth/actions.ts';
import { recordAudit } from '../audit/service.ts';
import type { Ctx } from '../context.ts';
import type { DomainPorts } from '../ports.ts';
import { addressed } from '../tenancy.ts';
import { snapshotBefore } from './snapshot.ts';
import * as store from './store.ts';

/** CONTRACT §15: a queued change waits 24 hours for its second key. */
export const APPROVAL_TTL_MS = 24 * 3_600_000;

// Any service function: its ports bundle (if it takes one), the request's Ctx, then its own arguments.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Service = (...args: any[]) => Promise<unknown>;

/** A guarded action as registered by governed(): how to call its service again from a stored request. */
export interface GuardedCall {
  action: Action;
  resource: GuardedResource | 'governance' | AlwaysGuarded;
  /** The DomainPorts bundle the service takes first, or null when it takes only the Ctx. */
  bundle: keyof DomainPorts | null;
  /** The names of the service's id arguments after the Ctx (REST's path parameters), e.g. ['key_id']. */
  params: readonly string[];
  service: Service;
}

/** A stored call: the path ids by name, and the body (absent when the call had none). */
export interface StoredCall {
  params: Record<string, string>;
  body?: Prisma.InputJsonObject;
}

const REGISTRY = new Map<string, GuardedCall>();

export function registeredCall(action: string): GuardedCall | undefined {
  return REGISTRY.get(action);
}

/** The service's arguments from a stored call, with the ports bundle and Ctx in front. */
export function argumentsOf(call: GuardedCall, ports: DomainPorts | null, ctx: Ctx, stored: StoredCall): unknown[] {
  const own = [...call.params.map((name) => stored.params[name]), ...(stored.body !== undefined ? [stored.body] : [])];
  return call.bundle ? [ports![call.bundle], ctx, ...own] : [ctx, ...own];
}

function storedCallOf(call: GuardedCall, own: unknown[]): StoredCall {
  const params: Record<string, string> = {};
  call.params.forEach((name, i) => (params[name] = String(own[i])));
  const body = own[call.params.length];
  // Through JSON: what is stored is what a later apply reads (undefined members dropped, as a JSON body would be).
  return body === undefined || body === null ? { params } : { params, body: JSON.parse(JSON.stringify(body)) as Prisma.InputJsonObject };
}

/** The project a call names before the service resolves it; null when only the service can tell (an id's owner). */
function projectHint(ctx: Ctx, stored: StoredCall): string | null {
  const inBody = stored.body?.project_id;
  const candidates = [ctx.caller.projectId, stored.params.project_id, typeof inBody === 'string' ? inBody : null, ctx.namedProjectId, ctx.headerProjectId];
  return candidates.find((p): p is string => typeof p === 'string' && p !== '') ?? null;
}

async function isGuarded(db: Db, projectId: string, resource: GuardedCall['resource']): Promise<boolean> {
  if ((ALWAYS_GUARDED as readonly string[]).includes(resource)) return true;
  const list = await store.dualControlOf(db, projectId);
  if (list === null) return false; // no such project: the service answers not_found
  // CONTRACT §15: once the list is non-empty, changing it is itself guarded.
  return resource === 'governance' ? list.length > 0 : list.includes(resource);
}

/** Thrown out of a dry run's transaction so that PostgreSQL rolls back everything the service wrote. */
class DryRunDone extends Error {
  constructor() {
    super('dry run complete');
  }
}

const WRITES = new Set(['create', 'createMany', 'createManyAndReturn', 'update', 'updateMany', 'updateManyAndReturn', 'upsert', 'delete', 'deleteMany']);

/**
 * A database handle for a dry run: the service's own transaction runs in full (every check it makes against the
 * rows, its writes, audit and events) and is then rolled back, and its code after the commit (cache evictions, the
 * bus) never runs, as the transaction does not return. A write outside a transaction would not be rolled back, so it
 * is refused: guarded services write only inside ctx.db.$transaction.
 */
function dryRunDb(db: Db): Db {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === '$transaction') {
        return async (fn: unknown, opts?: unknown) => {
          if (typeof fn !== 'function') throw new Error('dry run: a guarded service must use an interactive transaction');
          await target.$transaction(async (tx) => {
            await (fn as (tx: unknown) => Promise<unknown>)(tx);
            throw new DryRunDone();
          }, opts as never);
          throw new DryRunDone();
        };
      }
      if (prop === '$executeRaw' || prop === '$executeRawUnsafe') {
        return () => {
          throw new Error('dry run: a guarded service wrote outside its transaction');
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value === 'function') return (value as (...a: unknown[]) => unknown).bind(target);
      if (value && typeof value === 'object' && typeof (value as { findFirst?: unknown }).findFirst === 'function') {
        return new Proxy(value, {
          get(delegate, method) {
            if (typeof method === 'string' && WRITES.has(method)) {
              return () => {
                throw new Error(`dry run: a guarded service wrote (${String(prop)}.${method}) outside its transaction`);
              };
            }
            const fn = Reflect.get(delegate, method, delegate) as unknown;
            return typeof fn === 'function' ? (fn as (...a: unknown[]) => unknown).bind(delegate) : fn;
          },
        });
      }
      return value;
    },
  });
}

/**
 * Runs the service's own validation without applying anything: the service itself, on a copy of the Ctx whose
 * database rolls back. Its errors (400 with param, 404 for another project's ids, 409 name conflicts…) are the
 * caller's answer. Returns the project the service addressed.
 */
async function dryRun(ctx: Ctx, run: (dryCtx: Ctx) => Promise<unknown>): Promise<string | null> {
  const dryCtx: Ctx = { ...ctx, db: dryRunDb(ctx.db) };
  try {
    await run(dryCtx);
  } catch (err) {
    if (!(err instanceof DryRunDone)) throw err;
  }
  return dryCtx.projectId;
}

async function queueApproval(ctx: Ctx, call: GuardedCall, projectId: string, stored: StoredCall): Promise<Approval> {
  const now = ctx.now();
  const before = await snapshotBefore(ctx.db, call.action, projectId, stored.params);
  addressed(ctx, projectId);
  return ctx.db.$transaction(async (tx) => {
    const approval = await store.insertApproval(tx, {
      id: newId('apr', now.getTime()),
      projectId,
      action: call.action,
      resource: call.resource,
      args: stored as unknown as Prisma.InputJsonObject,
      request: stored.body ?? {},
      ...(before !== null ? { before } : {}),
      requestedBy: ctx.caller.keyId,
      status: 'pending',
      expiresAt: new Date(now.getTime() + APPROVAL_TTL_MS),
      createdAt: now,
    });
    await recordAudit(tx, ctx, 'approval.create', {
      projectId,
      targetId: approval.id,
      data: { action: call.action, params: stored.params, request: stored.body ?? {} },
    });
    return approval;
  });
}

/** 403 dual_control_required naming the queued approval in the error object and X-Svc-Approval-Id. */
export function dualControlRequired(approval: Pick<Approval, 'id' | 'resource'>): SvcError {
  return new SvcError('dual_control_required', {
    message: `The project keeps ${approval.resource} under dual control: the change is queued as ${approval.id} for a second key to approve.`,
    headers: { 'X-Svc-Approval-Id': approval.id },
    details: { approval_id: approval.id },
  });
}

/**
 * The one dual control mechanism: wraps a guarded service so that, where the addressed project lists the action's
 * resource (GUARDED_ACTIONS in domain/auth/actions.ts), the call is validated by a dry run of the service, stored as
 * a pending approval (audit approval.create) and answered 403 dual_control_required with the approval's id. Both
 * adapters call the wrapped function (domain/governance/guarded.ts), so REST and GraphQL cannot differ. Elsewhere the
 * service runs as if unwrapped. `params` names the service's id arguments after the Ctx.
 */
export function governed<F extends Service>(action: Action, bundle: keyof DomainPorts | null, service: F, params: readonly string[] = []): F {
  const resource = GUARDED_ACTIONS[action];
  if (!resource) throw new Error(`${action} names no guarded resource in GUARDED_ACTIONS (domain/auth/actions.ts)`);
  const call: GuardedCall = { action, resource, bundle, params, service };
  REGISTRY.set(action, call);
  const wrapped = async (...args: unknown[]) => {
    const at = bundle ? 1 : 0;
    const ctx = args[at] as Ctx;
    const stored = storedCallOf(call, args.slice(at + 1));
    const hint = projectHint(ctx, stored);
    if (hint !== null && !(await isGuarded(ctx.db, hint, resource))) return service(...args);
    const projectId = (await dryRun(ctx, (dryCtx) => service(...args.map((a, i) => (i === at ? dryCtx : a))))) ?? hint;
    // The operator naming no project (e.g. a key by its id): the dry run found the project, and its policy decides.
    if (projectId === null || (hint === null && !(await isGuarded(ctx.db, projectId, resource)))) return service(...args);
    throw dualControlRequired(await queueApproval(ctx, call, projectId, stored));
  };
  return wrapped as F;
}
