import { session } from './session.ts';

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

/** POST /graphql with the session's key; the only way the console talks to the gateway. */
export async function gql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const key = session.key();
  const project = session.project();
  const consoleSession = session.consoleSession();
  const res = await fetch('/graphql', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
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
