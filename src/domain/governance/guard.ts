import type { Approval, Prisma } from '../../generated/prisma/client.ts';
import type { Db } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { ALWAYS_GUARDED, GUARDED_ACTIONS, type Action, type AlwaysGuarded, type GuardedResource } from '../auth/actions.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, type Ctx, type Checked } from '../context.ts';
import type { DomainPorts } from '../ports.ts';
import { snapshotBefore } from './snapshot.ts';
import * as store from './store.ts';

/** CONTRACT §15: a queued change waits 24 hours for its second key. */
export const APPROVAL_TTL_MS = 24 * 3_600_000;

// A guarded service's two steps: check (the ports bundle if it takes one, the Ctx, then its own arguments) and apply
// (the same bundle and Ctx, check's answer, and the transaction to write in).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Step = (...args: any[]) => Promise<any>;

/** A guarded action as registered by governed(): how to check and apply it again from a stored request. */
export interface GuardedCall {
  action: Action;
  resource: GuardedResource | 'governance' | AlwaysGuarded;
  /** The DomainPorts bundle the service takes first, or null when it takes only the Ctx. */
  bundle: keyof DomainPorts | null;
  /** The names of the service's id arguments after the Ctx (REST's path parameters), e.g. ['key_id']. */
  params: readonly string[];
  /** Validation and reads only: the caller's errors, or what apply needs with the project it addresses. */
  check: (...args: unknown[]) => Promise<Checked>;
  /** Performs the change check validated, in the transaction it is given. */
  apply: (...args: unknown[]) => Promise<unknown>;
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

/** The ports bundle (if the service takes one) and the Ctx: what both steps take first. */
export function leadingArguments(call: GuardedCall, ports: DomainPorts | null, ctx: Ctx): unknown[] {
  return call.bundle ? [ports![call.bundle], ctx] : [ctx];
}

/** check's arguments from a stored call, with the ports bundle and Ctx in front. */
export function argumentsOf(call: GuardedCall, ports: DomainPorts | null, ctx: Ctx, stored: StoredCall): unknown[] {
  const own = [...call.params.map((name) => stored.params[name]), ...(stored.body !== undefined ? [stored.body] : [])];
  return [...leadingArguments(call, ports, ctx), ...own];
}

function storedCallOf(call: GuardedCall, own: unknown[]): StoredCall {
  const params: Record<string, string> = {};
  call.params.forEach((name, i) => (params[name] = String(own[i])));
  const body = own[call.params.length];
  // Through JSON: what is stored is what the check on approval reads (undefined members dropped, as a JSON body would be).
  return body === undefined || body === null ? { params } : { params, body: JSON.parse(JSON.stringify(body)) as Prisma.InputJsonObject };
}

/** The project a call names before the service resolves it; null when only the service can tell (an id's owner). */
function projectHint(ctx: Ctx, stored: StoredCall): string | null {
  const inBody = stored.body?.project_id;
  const candidates = [ctx.caller.projectId, stored.params.project_id, typeof inBody === 'string' ? inBody : null, ctx.project.body ?? ctx.project.query, ctx.project.header];
  return candidates.find((p): p is string => typeof p === 'string' && p !== '') ?? null;
}

async function isGuarded(db: Db, projectId: string, resource: GuardedCall['resource']): Promise<boolean> {
  if ((ALWAYS_GUARDED as readonly string[]).includes(resource)) return true;
  const row = await db.project.findUnique({ where: { id: projectId }, select: { dualControl: true } });
  if (row === null) return false; // no such project: the service answers not_found
  // CONTRACT §15: once the list is non-empty, changing it is itself guarded.
  return resource === 'governance' ? row.dualControl.length > 0 : row.dualControl.includes(resource);
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
 * The one dual control mechanism: wraps a guarded service, given as its two steps, so that, where the addressed project
 * lists the action's resource (GUARDED_ACTIONS in domain/auth/actions.ts), the call is validated by the service's
 * check (which writes nothing), stored as a pending approval with the resource's `before` (audit approval.create) and
 * answered 403 dual_control_required with the approval's id. Approving it checks again and applies
 * (domain/governance/approvals.ts). Both adapters call the wrapped function (domain/governance/guarded.ts), so REST and
 * GraphQL cannot differ. Elsewhere the service runs as if unwrapped: check, then apply. `params` names the service's
 * id arguments after the Ctx.
 */
export function governed<A extends unknown[], C extends Checked, R>(
  action: Action,
  bundle: keyof DomainPorts | null,
  params: readonly string[],
  check: (...args: A) => Promise<C>,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  apply: (...args: any[]) => Promise<R>,
): (...args: A) => Promise<R> {
  const resource = GUARDED_ACTIONS[action];
  if (!resource) throw new Error(`${action} names no guarded resource in GUARDED_ACTIONS (domain/auth/actions.ts)`);
  const call: GuardedCall = { action, resource, bundle, params, check: check as Step, apply };
  REGISTRY.set(action, call);
  const at = bundle ? 1 : 0;
  const run = async (args: A): Promise<R> => apply(...args.slice(0, at + 1), await check(...args));
  return async (...args: A): Promise<R> => {
    const ctx = args[at] as Ctx;
    const stored = storedCallOf(call, args.slice(at + 1));
    const hint = projectHint(ctx, stored);
    if (hint !== null && !(await isGuarded(ctx.db, hint, resource))) return run(args);
    // On a copy of the Ctx: a refused change leaves the request's addressed project as it was.
    const checked = await check(...(args.map((a, i) => (i === at ? { ...ctx } : a)) as A));
    const projectId = checked.projectId;
    // The operator naming no project (e.g. a key by its id): the check found the project, and its policy decides.
    if (hint === null && !(await isGuarded(ctx.db, projectId, resource))) {
      addressed(ctx, projectId);
      return apply(...args.slice(0, at + 1), checked);
    }
    throw dualControlRequired(await queueApproval(ctx, call, projectId, stored));
  };
}
