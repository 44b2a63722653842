import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { CidrList } from '../../kernel/cidr.ts';
import type { Caller, Ctx, OperatorSession } from '../context.ts';
import { auditOperator, refuseProjectAddress } from './audit.ts';
import { safeEqualHex } from '../auth/service.ts';
import type { OperatorPorts, RequestFacts } from './ports.ts';
import { scopesOfRole, strongest, type Role } from './roles.ts';
import type { SessionRecord } from './session-store.ts';

export type SignInMethod = 'oidc' | 'saml';

/** The cookie's token: 256 random bits, base64url. Only its SHA-256 is stored. */
const newToken = () => randomBytes(32).toString('base64url');
export const digest = (value: string): string => createHash('sha256').update(value).digest('hex');

/**
 * The CSRF token of a session, derived from the cookie's token: the page reads it from GET /auth/session and sends it
 * as X-Svc-CSRF-Token. A page of another origin can send the cookie (it cannot: SameSite=Strict) but never read this.
 */
export const csrfTokenOf = (token: string): string => createHash('sha256').update(`csrf\0${token}`).digest('base64url');

const ended = (message = 'The console session is missing, expired or ended: sign in again.') =>
  new SvcError('invalid_api_key', { message });

// The audit rows live in audit.ts (the tenancy rules in context.ts write one too); provisioning imports them from here.
export { auditOperator };

/** The console's IP allowlist (SVC_CONSOLE_IP_ALLOWLIST) for a sign-in route; a refusal is audited. */
export async function assertConsoleAddress(ports: OperatorPorts, facts: RequestFacts, what: string): Promise<void> {
  if (ports.settings.consoleAllowlist.allows(facts.ip)) return;
  await auditOperator(ports.db, facts, ports.clock.now(), null, 'operator.sign_in_refused', { data: { reason: 'ip_not_allowed', step: what } });
  throw new SvcError('insufficient_scope', { message: "This address is not in the console's IP allowlist." });
}

/** A refused sign-in (unknown or deactivated operator, a bad assertion, a failed code exchange): audited, then 401. */
export async function refuseSignIn(
  ports: OperatorPorts,
  facts: RequestFacts,
  method: SignInMethod,
  reason: string,
  userName: string | null = null,
): Promise<SvcError> {
  const operator = userName ? await ports.db.operator.findUnique({ where: { userNameKey: userName.toLowerCase() }, select: { id: true } }) : null;
  await auditOperator(ports.db, facts, ports.clock.now(), operator?.id ?? null, 'operator.sign_in_refused', {
    targetId: operator?.id ?? null,
    data: { method, reason, user_name: userName },
  });
  return new SvcError('invalid_api_key', { message: `The sign-in was refused (${reason}).` });
}

export interface SignedIn {
  /** For the cookie only; never stored. */
  token: string;
  session: SessionRecord;
}

/**
 * Starts a session for the operator the identity provider vouched for. The operator must have been provisioned (SCIM)
 * and be active: the identity provider proves who signs in, SCIM says who may. Audits operator.sign_in.
 */
export async function signIn(ports: OperatorPorts, facts: RequestFacts, method: SignInMethod, userName: string): Promise<SignedIn> {
  await assertConsoleAddress(ports, facts, 'callback');
  const operator = await ports.db.operator.findUnique({ where: { userNameKey: userName.toLowerCase() } });
  if (!operator) throw await refuseSignIn(ports, facts, method, 'not_provisioned', userName);
  if (!operator.active) throw await refuseSignIn(ports, facts, method, 'deactivated', userName);
  const now = ports.clock.now();
  const token = newToken();
  const session: SessionRecord = {
    id: newId('ses', now),
    tokenHash: digest(token),
    csrfHash: digest(csrfTokenOf(token)),
    operatorId: operator.id,
    method,
    ip: facts.ip,
    createdAt: now,
    lastSeenAt: now,
    expiresAt: now + ports.settings.absoluteTimeoutMs,
  };
  await ports.sessions.create(session);
  await auditOperator(ports.db, facts, now, operator.id, 'operator.sign_in', {
    targetId: session.id,
    data: { method, user_name: operator.userName, session_id: session.id },
  });
  return { token, session };
}

export interface SessionRequest {
  token: string;
  /** The X-Svc-CSRF-Token header; `skip` for the reads that hand it out (GET /auth/session). */
  csrf: string | undefined | 'skip';
  /** The project the request names (X-Svc-Project, the path's or the query's project_id), if any. */
  project: string | null;
}

/** The roles an operator's groups give it, per project; several groups: the strongest role. */
async function rolesOf(db: Db, operatorId: string): Promise<Map<string, Role> | null> {
  const operator = await db.operator.findUnique({
    where: { id: operatorId },
    select: { active: true, memberships: { select: { group: { select: { roles: { select: { projectId: true, role: true } } } } } } },
  });
  if (!operator?.active) return null;
  const roles = new Map<string, Role>();
  for (const m of operator.memberships) {
    for (const r of m.group.roles) roles.set(r.projectId, strongest(roles.get(r.projectId), r.role as Role));
  }
  return roles;
}

/** Refreshing last-seen on every request would write on every request: within this much, the idle clock is exact. */
const touchEvery = (idleMs: number) => Math.min(60_000, Math.max(1_000, Math.floor(idleMs / 10)));

/**
 * A console request's caller from its session cookie (CONTRACT §17). Checks, in order: the session exists and neither
 * timeout has passed (else 401, and a timed-out session is ended and audited), the operator is still active, the
 * console's IP allowlist, the CSRF token, the named project is one of the operator's (else 404) and its IP allowlist.
 * The projects whose allowlist excludes the address ride along (`ipRefused`): tenancy (context.ts) refuses them wherever a later
 * step names them (the body, a GraphQL argument), with the same audited 403.
 * The roles are read on every request, so a group change applies to the next one.
 */
export async function sessionCaller(ports: OperatorPorts, facts: RequestFacts, req: SessionRequest): Promise<Caller> {
  const now = ports.clock.now();
  const tokenHash = digest(req.token);
  const session = await ports.sessions.find(tokenHash);
  if (!session) throw ended();
  const timedOut = now >= session.expiresAt ? 'absolute_timeout' : now - session.lastSeenAt >= ports.settings.idleTimeoutMs ? 'idle_timeout' : null;
  if (timedOut) {
    if (await ports.sessions.remove(tokenHash)) {
      await auditOperator(ports.db, facts, now, session.operatorId, 'operator.sign_out', {
        targetId: session.id,
        data: { reason: timedOut, session_id: session.id },
      });
    }
    throw ended(`The console session ended (${timedOut === 'idle_timeout' ? 'idle timeout' : 'absolute timeout'}): sign in again.`);
  }
  const refuse = async (reason: string, message: string) => {
    await auditOperator(ports.db, facts, now, session.operatorId, 'operator.request_refused', {
      targetId: session.id,
      data: { reason, session_id: session.id },
    });
    return new SvcError('insufficient_scope', { message });
  };
  if (!ports.settings.consoleAllowlist.allows(facts.ip)) throw await refuse('ip_not_allowed', "This address is not in the console's IP allowlist.");
  if (req.csrf !== 'skip' && !(req.csrf !== undefined && safeEqualHex(digest(req.csrf), session.csrfHash))) {
    throw await refuse('csrf', 'A request made with the console session must carry its X-Svc-CSRF-Token header.');
  }

  const roles = await rolesOf(ports.db, session.operatorId);
  if (!roles) {
    // Deprovisioned between its last request and this one (SCIM ends the sessions too; this covers a race).
    await ports.sessions.removeForOperator(session.operatorId);
    throw ended();
  }
  if (req.project !== null && !roles.has(req.project)) throw new SvcError('not_found', { param: 'project_id', message: 'No such project.' });
  const projectId = req.project ?? (roles.size === 1 ? [...roles.keys()][0]! : null);
  // Every project's allowlist at once (one query): the request may name another project later, in its body or as a
  // GraphQL argument, and tenancy (context.ts) refuses those of this set wherever they are named.
  const lists = roles.size === 0 ? [] : await ports.db.projectIpAllowlist.findMany({ where: { projectId: { in: [...roles.keys()] } } });
  const ipRefused = new Set(lists.filter((l) => !new CidrList(l.cidrs).allows(facts.ip)).map((l) => l.projectId));
  if (projectId !== null && ipRefused.has(projectId)) {
    throw await refuseProjectAddress(ports.db, facts, now, { operatorId: session.operatorId, sessionId: session.id }, projectId);
  }
  const all = [...roles.values()];
  const role: Role | null = projectId !== null ? roles.get(projectId)! : all.length === 0 ? null : all.every((r) => r === 'admin') ? 'admin' : 'viewer';

  if (now - session.lastSeenAt >= touchEvery(ports.settings.idleTimeoutMs)) {
    await ports.sessions.touch(tokenHash, now);
  }
  const operator = await ports.db.operator.findUniqueOrThrow({ where: { id: session.operatorId }, select: { userName: true } });
  const info: OperatorSession = {
    operatorId: session.operatorId,
    userName: operator.userName,
    sessionId: session.id,
    method: session.method,
    expiresAt: session.expiresAt,
    role,
    projects: roles,
    ipRefused,
  };
  return { kind: 'session', keyId: session.operatorId, projectId, scopes: role ? scopesOfRole(role) : [], session: info };
}

/** A viewer's write (or an action its role lacks), refused: audited as operator.request_refused, then 403. */
export async function refuseByRole(ports: OperatorPorts, ctx: Ctx, action: string): Promise<SvcError> {
  const session = ctx.caller.session;
  await auditOperator(ports.db, ctx, ports.clock.now(), ctx.caller.keyId, 'operator.request_refused', {
    projectId: ctx.caller.projectId,
    targetId: session?.sessionId ?? null,
    data: { reason: 'role', role: session?.role ?? null, action, session_id: session?.sessionId ?? null },
  });
  return new SvcError('insufficient_scope', {
    message: `The ${session?.role ?? 'operator'} role does not allow ${action} in this project (a viewer reads only).`,
  });
}

/** Ends the caller's session. Audits operator.sign_out. */
export async function signOut(ports: OperatorPorts, ctx: Ctx, token: string): Promise<void> {
  const session = ctx.caller.session;
  if (!session) throw ended();
  await ports.sessions.remove(digest(token));
  await auditOperator(ports.db, ctx, ports.clock.now(), session.operatorId, 'operator.sign_out', {
    targetId: session.sessionId,
    data: { reason: 'signed_out', session_id: session.sessionId },
  });
}

/**
 * Ends every session of an operator at once (deprovisioning, deactivation): the store is shared by every replica and
 * read on every request, so the next request anywhere is refused. Audits operator.sign_out per session.
 */
export async function endOperatorSessions(ports: OperatorPorts, facts: RequestFacts, operatorId: string, reason: string): Promise<number> {
  const sessions = await ports.sessions.removeForOperator(operatorId);
  const now = ports.clock.now();
  for (const s of sessions) {
    await auditOperator(ports.db, facts, now, 'scim', 'operator.sign_out', { targetId: s.id, data: { reason, session_id: s.id, operator_id: operatorId } });
  }
  return sessions.length;
}
