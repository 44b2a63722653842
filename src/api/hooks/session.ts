import { parse as parseCookies, serialize } from 'cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../../domain/context.ts';
import { sessionCaller } from '../../domain/operators/service.ts';

/** The console session cookie (CONTRACT §17): HttpOnly, Secure (README: the loopback exception), SameSite=Strict. */
export const SESSION_COOKIE = 'svc_session';
export const CSRF_HEADER = 'x-svc-csrf-token';

/** The session cookie's token, when the request carries one and no Authorization header (a key always wins). */
export function sessionTokenOf(req: FastifyRequest): string | null {
  if (req.headers.authorization !== undefined) return null;
  const header = req.headers.cookie;
  if (!header) return null;
  const token = parseCookies(header)[SESSION_COOKIE];
  return token && /^[A-Za-z0-9_-]{43}$/.test(token) ? token : null;
}

const stringOf = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/**
 * A cookie-authenticated request's Caller. The project it addresses is read before the route runs: X-Svc-Project (the
 * console sends it), else the path's or the query's project_id. `csrf: 'skip'` only for GET /auth/session, which
 * hands the token out.
 */
export function sessionCallerOf(req: FastifyRequest, token: string, csrf?: 'skip'): Promise<Caller> {
  const project =
    stringOf(req.headers['x-svc-project']) ??
    stringOf((req.params as { project_id?: unknown } | undefined)?.project_id) ??
    stringOf((req.query as { project_id?: unknown } | undefined)?.project_id);
  const header = req.headers[CSRF_HEADER];
  return sessionCaller(req.server.ports.operators, { requestId: req.id, ip: req.ip ?? null }, {
    token,
    csrf: csrf ?? (typeof header === 'string' ? header : undefined),
    project,
  });
}

export function setSessionCookie(req: FastifyRequest, reply: FastifyReply, token: string, maxAgeS: number): void {
  reply.header('Set-Cookie', serialize(SESSION_COOKIE, token, {
    httpOnly: true,
    secure: req.server.deps.config.operators.secureCookie,
    sameSite: 'strict',
    path: '/',
    maxAge: maxAgeS,
  }));
}

export function clearSessionCookie(req: FastifyRequest, reply: FastifyReply): void {
  reply.header('Set-Cookie', serialize(SESSION_COOKIE, '', {
    httpOnly: true,
    secure: req.server.deps.config.operators.secureCookie,
    sameSite: 'strict',
    path: '/',
    maxAge: 0,
  }));
}
