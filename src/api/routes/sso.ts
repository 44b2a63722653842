import { parse as parseCookies, serialize } from 'cookie';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { unixSeconds, NO_PROJECT_NAMES, makeCtx } from '../../domain/context.ts';
import { assertConsoleAddress, csrfTokenOf, refuseSignIn, signIn, signOut, type SignInMethod } from '../../domain/operators/service.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { clearSessionCookie, sessionCallerOf, sessionTokenOf, setSessionCookie } from '../hooks/session.ts';
import type { PendingOidc } from './sso/oidc.ts';
import { OidcRefusal } from './sso/refusal.ts';

/** The sealed OIDC round-trip state: SameSite=Lax, as the provider's redirect back is a cross-site navigation. */
const OIDC_COOKIE = 'svc_oidc';
const OIDC_AAD = 'svc-oidc-pending';

const facts = (req: FastifyRequest) => ({ requestId: req.id, ip: req.ip ?? null });

/** Where the browser lands after a sign-in attempt: the console, which shows a refusal's reason. */
function backToConsole(reply: FastifyReply, reason?: string): FastifyReply {
  return reply.code(303).header('Location', reason ? `/admin/?signin_error=${encodeURIComponent(reason)}` : '/admin/').send();
}

/**
 * Console sign-in for operators (CONTRACT §17, README "Operators: SSO, SCIM, sessions"): OpenID Connect (authorization
 * code + PKCE) and SAML 2.0, configured by environment; the session lives server-side and the browser holds only an
 * HttpOnly, SameSite=Strict cookie. The API-key sign-in of the console is unchanged (the key never reaches a cookie).
 */
export const ssoRoutes: FastifyPluginAsync = async (app) => {
  const { config } = app.deps;
  const settings = config.operators;
  const ports = app.ports.operators;
  const base = config.publicUrl ?? '';
  // The protocol libraries are loaded only when their method is configured (a start-up cost for those who use them).
  const oidc = settings.oidc ? new (await import('./sso/oidc.ts')).OidcSignIn(settings.oidc, `${base}/auth/oidc/callback`) : null;
  const saml = settings.saml ? new (await import('./sso/saml.ts')).SamlSignIn(settings.saml, `${base}/auth/saml/acs`) : null;
  const sessionMaxAgeS = Math.ceil(settings.absoluteTimeoutMs / 1000);

  // The identity provider posts the SAML response as a form; only this plugin's routes read forms.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  /** Which sign-in methods the console offers (the page's sign-in buttons). */
  app.get('/auth/methods', { config: { action: 'public' } }, async (req) => {
    await assertConsoleAddress(ports, facts(req), 'methods');
    return {
      object: 'svc.sign_in_methods',
      methods: [...(oidc ? ['oidc'] : []), ...(saml ? ['saml'] : []), 'api_key'],
      idle_timeout_s: settings.idleTimeoutMs / 1000,
      absolute_timeout_s: settings.absoluteTimeoutMs / 1000,
    };
  });

  const finishSignIn = async (req: FastifyRequest, reply: FastifyReply, method: SignInMethod, userName: string) => {
    try {
      const { token } = await signIn(ports, facts(req), method, userName);
      setSessionCookie(req, reply, token, sessionMaxAgeS);
      return backToConsole(reply);
    } catch (err) {
      // signIn audited its refusal already.
      if (err instanceof SvcError && err.code !== 'internal_error') {
        return backToConsole(reply, err.code === 'insufficient_scope' ? 'ip_not_allowed' : 'not_allowed');
      }
      throw err;
    }
  };

  app.get('/auth/oidc/start', { config: { action: 'public' } }, async (req, reply) => {
    if (!oidc) throw new SvcError('not_found', { message: 'OpenID Connect sign-in is not configured (SVC_OIDC_ISSUER).' });
    await assertConsoleAddress(ports, facts(req), 'oidc_start');
    const { url, pending } = await oidc.start(app.deps.clock.now());
    reply.header('Set-Cookie', serialize(OIDC_COOKIE, app.deps.webhooks.secretBox.seal(JSON.stringify(pending), OIDC_AAD), {
      httpOnly: true,
      secure: settings.secureCookie,
      sameSite: 'lax',
      path: '/auth/oidc',
      maxAge: 600,
    }));
    return reply.code(302).header('Location', url).send();
  });

  app.get('/auth/oidc/callback', { config: { action: 'public' } }, async (req, reply) => {
    if (!oidc) throw new SvcError('not_found', { message: 'OpenID Connect sign-in is not configured (SVC_OIDC_ISSUER).' });
    reply.header('Set-Cookie', serialize(OIDC_COOKIE, '', { httpOnly: true, secure: settings.secureCookie, sameSite: 'lax', path: '/auth/oidc', maxAge: 0 }));
    const sealed = parseCookies(req.headers.cookie ?? '')[OIDC_COOKIE];
    let pending: PendingOidc | null = null;
    try {
      pending = sealed ? (JSON.parse(app.deps.webhooks.secretBox.open(sealed, OIDC_AAD)) as PendingOidc) : null;
    } catch {
      pending = null;
    }
    if (!pending || pending.expiresAt <= app.deps.clock.now()) {
      await refuseSignIn(ports, facts(req), 'oidc', 'no_pending_sign_in');
      return backToConsole(reply, 'expired');
    }
    let userName: string;
    try {
      userName = await oidc.finish(new URL(req.url, base), pending);
    } catch (err) {
      if (err instanceof OidcRefusal) {
        await refuseSignIn(ports, facts(req), 'oidc', err.reason, err.userName);
        return backToConsole(reply, 'invalid_response');
      }
      req.log.warn({ err: (err as Error).message }, 'OpenID Connect sign-in failed');
      await refuseSignIn(ports, facts(req), 'oidc', 'provider_response_invalid');
      return backToConsole(reply, 'invalid_response');
    }
    return finishSignIn(req, reply, 'oidc', userName);
  });

  app.get('/auth/saml/login', { config: { action: 'public' } }, async (req, reply) => {
    if (!saml) throw new SvcError('not_found', { message: 'SAML sign-in is not configured (SVC_SAML_ENTRY_POINT).' });
    await assertConsoleAddress(ports, facts(req), 'saml_login');
    return reply.code(302).header('Location', await saml.authorizeUrl(new URL(base).host)).send();
  });

  app.post<{ Body: { SAMLResponse?: unknown } }>('/auth/saml/acs', { config: { action: 'public' } }, async (req, reply) => {
    if (!saml) throw new SvcError('not_found', { message: 'SAML sign-in is not configured (SVC_SAML_ENTRY_POINT).' });
    const response = req.body?.SAMLResponse;
    let userName: string;
    try {
      if (typeof response !== 'string' || response === '') throw new Error('no SAMLResponse');
      userName = await saml.finish(response);
    } catch (err) {
      req.log.warn({ err: (err as Error).message }, 'SAML sign-in refused');
      await refuseSignIn(ports, facts(req), 'saml', 'invalid_assertion');
      return backToConsole(reply, 'invalid_assertion');
    }
    return finishSignIn(req, reply, 'saml', userName);
  });

  app.get('/auth/saml/metadata', { config: { action: 'public' } }, async (_req, reply) => {
    if (!saml) throw new SvcError('not_found', { message: 'SAML sign-in is not configured (SVC_SAML_ENTRY_POINT).' });
    return reply.type('application/samlmetadata+xml').send(saml.metadata());
  });

  /** The signed-in operator, its projects and the CSRF token the console sends back on every call. */
  app.get('/auth/session', { config: { action: 'public' } }, async (req) => {
    const token = sessionTokenOf(req);
    if (!token) throw new SvcError('invalid_api_key', { message: 'No console session: sign in.' });
    const caller = await sessionCallerOf(req, token, 'skip');
    const s = caller.session!;
    return {
      object: 'svc.operator_session',
      id: s.sessionId,
      operator: { id: s.operatorId, user_name: s.userName },
      method: s.method,
      csrf_token: csrfTokenOf(token),
      projects: [...s.projects].map(([project_id, role]) => ({ project_id, role })),
      idle_timeout_s: settings.idleTimeoutMs / 1000,
      expires_at: unixSeconds(new Date(s.expiresAt)),
    };
  });

  app.post('/auth/sign-out', { config: { action: 'public' } }, async (req, reply) => {
    const token = sessionTokenOf(req);
    if (!token) throw new SvcError('invalid_api_key', { message: 'No console session: sign in.' });
    const caller = await sessionCallerOf(req, token);
    const ctx = makeCtx(app.deps, { requestId: req.id, caller, ip: req.ip ?? null, project: NO_PROJECT_NAMES });
    await signOut(ports, ctx, token);
    clearSessionCookie(req, reply);
    return { object: 'svc.operator_session', id: caller.session!.sessionId, status: 'ended' };
  });
};
