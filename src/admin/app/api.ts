import { session, sso } from './session.ts';

/** An error from the gateway, REST-shaped or GraphQL-shaped, with what a person needs to act on it. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly requestId: string | null,
    readonly httpStatus: number,
    readonly param: string | null = null,
    /** Unix seconds at which a rate-limited call may be retried. */
    readonly retryAt: number | null = null,
    /** dual_control_required: the approval the change was queued as (CONTRACT §15). */
    readonly approvalId: string | null = null,
  ) {
    super(message);
  }
}

interface GraphQLErrorJson {
  message: string;
  extensions?: { code?: string; param?: string | null; request_id?: string; http_status?: number; approval_id?: string };
}

/** The SSO session (its CSRF token) whose end the page was told of already, and whether that told why it ended. */
let endedSession: string | null = null;
let endedWhy = false;
/** The gateway's 401 for a session that timed out names the timeout; the others (already ended) say "missing". */
const namesWhy = (message: string) => message.startsWith('The console session ended (');

/** POST /graphql with the session's key; the only way the console talks to the gateway. */
export async function gql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const key = session.key();
  const project = session.project();
  const consoleSession = session.consoleSession();
  const csrf = key ? null : sso.csrf();
  const res = await fetch('/graphql', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      // An SSO session: the cookie goes by itself (same origin); the CSRF token proves the call comes from this page.
      ...(csrf ? { 'x-svc-csrf-token': csrf } : {}),
      ...(project ? { 'x-svc-project': project } : {}),
      // Lets the audit log record the console's key listings once per session and page, not on every visit.
      ...(consoleSession ? { 'x-svc-console-session': consoleSession } : {}),
    },
    body: JSON.stringify({ query, variables }),
  });
  const requestId = res.headers.get('x-svc-request-id');
  const reset = res.headers.get('x-svc-ratelimit-reset');
  let body: { data?: T; errors?: GraphQLErrorJson[]; error?: { code: string; message: string; request_id: string; param: string | null } };
  try {
    body = await res.json();
  } catch {
    throw new ApiError(`The gateway answered ${res.status}.`, 'internal_error', requestId, res.status);
  }
  if (body.error) {
    // An SSO session that ended (idle or absolute timeout, signed out, deprovisioned): back to the sign-in page.
    // Calls in flight together all get 401, in any order: the one the gateway answered first says why (idle or
    // absolute timeout) and the others find the session gone; the reason is shown whichever arrives first.
    if (csrf && res.status === 401 && (endedSession !== csrf || (!endedWhy && namesWhy(body.error.message)))) {
      endedSession = csrf;
      endedWhy = namesWhy(body.error.message);
      dispatchEvent(new CustomEvent('svc:session-ended', { detail: body.error.message }));
    }
    // Rejected before GraphQL ran (401, 429 from the hooks): the spec's REST error object.
    throw new ApiError(body.error.message, body.error.code, body.error.request_id, res.status, body.error.param, reset ? Number(reset) : null);
  }
  if (body.errors?.length) {
    const e = body.errors[0]!;
    const ext = e.extensions ?? {};
    throw new ApiError(e.message, ext.code ?? 'invalid_request', ext.request_id ?? requestId, ext.http_status ?? 400, ext.param ?? null, reset ? Number(reset) : null, ext.approval_id ?? null);
  }
  return body.data as T;
}

/** GET or POST on the gateway's /auth routes (sign-in methods, the SSO session, sign-out); the REST error object on failure. */
export async function auth<T>(path: string, init: { method?: 'GET' | 'POST' } = {}): Promise<T> {
  const csrf = sso.csrf();
  const res = await fetch(path, { method: init.method ?? 'GET', headers: csrf && init.method === 'POST' ? { 'x-svc-csrf-token': csrf } : {} });
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    const e = body?.error ?? { code: 'internal_error', message: `The gateway answered ${res.status}.`, request_id: null, param: null };
    throw new ApiError(e.message, e.code, e.request_id, res.status, e.param);
  }
  return body as T;
}
