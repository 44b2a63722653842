import { hash as oneShotHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { IdempotencyStore } from '../../domain/idempotency/store.ts';
import { isId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { addressed, idempotencyScope, readProjectNames } from '../../domain/context.ts';
import { errorBody } from '../error-body.ts';
import { graphqlProjectId } from './graphql-project.ts';

declare module 'fastify' {
  interface FastifyRequest {
    idempotency?: { scope: string; key: string };
    /** A multipart request's Idempotency-Key, begun once its form is read (beginMultipartIdempotency). */
    idempotencyAfterForm?: string | string[];
  }
  interface FastifyInstance {
    /** For a route that sends a stream: it takes req.idempotency over and completes or abandons it itself. */
    idempotencyStore: IdempotencyStore;
    /** Begins a multipart request's Idempotency-Key with its form as the body (see beginMultipartIdempotency). */
    beginIdempotency: (req: FastifyRequest, reply: FastifyReply, key: string | string[], body: unknown) => Promise<void>;
  }
}

/**
 * A multipart upload (RAG documents, Legal contracts) is read by its handler, after the hooks: its Idempotency-Key is
 * begun there, once the form is read, with the form as the request's body (its fields, and the file by its SHA-256,
 * name, type and size), so that the same key with another file is 409 idempotency_conflict as for JSON. Returns false
 * when the first answer was replayed (the reply is sent: the handler stops there).
 */
export async function beginMultipartIdempotency(req: FastifyRequest, reply: FastifyReply, form: unknown): Promise<boolean> {
  const key = req.idempotencyAfterForm;
  if (key === undefined) return true;
  req.idempotencyAfterForm = undefined;
  await req.server.beginIdempotency(req, reply, key, form);
  return !reply.sent;
}

/**
 * Key order must not change the fingerprint: {"a":1,"b":2} and {"b":2,"a":1} are the same request. Written without
 * recursion (an explicit stack): a body nested 100,000 levels deep is hashed like any other and then refused by
 * validation exactly as without the header, instead of overflowing the call stack (500).
 */
export function canonicalJson(value: unknown): string {
  const out: string[] = [];
  // Each entry is a value still to write, or a literal piece of text (a separator or a closing bracket).
  const stack: ({ text: string } | { value: unknown })[] = [{ value }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    if ('text' in item) {
      out.push(item.text);
      continue;
    }
    const v = item.value;
    if (Array.isArray(v)) {
      out.push('[');
      stack.push({ text: ']' });
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push({ value: v[i] });
        if (i > 0) stack.push({ text: ',' });
      }
    } else if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v as object).sort();
      out.push('{');
      stack.push({ text: '}' });
      for (let i = keys.length - 1; i >= 0; i--) {
        stack.push({ value: (v as Record<string, unknown>)[keys[i]!] });
        stack.push({ text: `${i > 0 ? ',' : ''}${JSON.stringify(keys[i])}:` });
      }
    } else {
      out.push(JSON.stringify(v) ?? 'null');
    }
  }
  return out.join('');
}

/**
 * The request id a stored error names, which its X-Svc-Request-Id must equal (spec §7): REST's `error.request_id`,
 * or GraphQL's `errors[].extensions.request_id`.
 */
function originalErrorRequestId(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { error?: { request_id?: unknown }; errors?: { extensions?: { request_id?: unknown } }[] } | null;
    const id = parsed?.error?.request_id ?? (Array.isArray(parsed?.errors) ? parsed.errors[0]?.extensions?.request_id : undefined);
    return typeof id === 'string' ? id : null;
  } catch {
    return null;
  }
}

/**
 * What the store keeps of an answer. CONTRACT §12: a zero-retention project's answer holds content, so it is not kept:
 * a replay answers 404 record_not_retained (and the call is still not executed twice).
 */
export function keptAnswer(req: FastifyRequest, status: number, body: string): { status: number; body: string } {
  if (!req.ctx?.zeroRetention || status >= 300) return { status, body };
  const message = 'The project keeps no content (zero retention): the first answer to this Idempotency-Key was not kept, and the request was not run again.';
  return { status: 404, body: JSON.stringify(errorBody(req, 'record_not_retained', message, 'Idempotency-Key')) };
}

/** Statuses whose result is not kept: a retry with the same key should run again (CONTRACT §5, Stripe's rule). */
const runAgain = (status: number) => status >= 500 || status === 429;

/** GraphQL answers a field's error with 200 and errors[]: one whose http_status is 5xx or 429 is not kept either. */
function graphqlRunAgain(payload: string): boolean {
  try {
    const errors = (JSON.parse(payload) as { errors?: { extensions?: { http_status?: unknown } }[] } | null)?.errors;
    return Array.isArray(errors) && errors.some((e) => typeof e?.extensions?.http_status === 'number' && runAgain(e.extensions.http_status));
  } catch {
    return false;
  }
}

/** The two hooks of Idempotency-Key; the app registers them so that a request without the header never enters them. */
export interface IdempotencyHooks {
  /** preValidation, for a request that sends Idempotency-Key. */
  begin: (req: FastifyRequest, reply: FastifyReply, done: () => void) => void | Promise<unknown>;
  /** onSend, for a request that began one (`req.idempotency` set). */
  finish: (req: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void) => void | Promise<unknown>;
}

/**
 * Idempotency-Key on every POST under /v1 and to /graphql (CONTRACT §5): scoped by project, kept 24 hours. The first response is
 * replayed with Idempotent-Replayed: true; a different body, or a first request still running, is 409.
 */
export function idempotencyHooks(app: FastifyInstance, store: IdempotencyStore): IdempotencyHooks {
  app.decorate('idempotencyStore', store);
  // Before schema validation: a different body is 409 even when it is also invalid (spec: same key, different body).
  const preValidation: IdempotencyHooks['begin'] = (req, reply, done) => {
    const key = req.headers['idempotency-key'];
    // POST /graphql too: a mutation retried with the same key and body is replayed, not run again.
    if (req.method !== 'POST' || key === undefined || !req.ctx || !(req.url.startsWith('/v1/') || req.routeOptions.url === '/graphql')) return done();
    // Its body is still unread: the handler begins the key once it has read the form.
    if (req.headers['content-type']?.startsWith('multipart/form-data')) {
      req.idempotencyAfterForm = key;
      return done();
    }
    return begin(req, reply, key, req.body);
  };

  const begin = async (req: FastifyRequest, reply: FastifyReply, key: string | string[], body: unknown) => {
    if (typeof key !== 'string' || key.length < 1 || key.length > 255) {
      throw invalid('Idempotency-Key', 'Idempotency-Key must be 1 to 255 characters.');
    }
    // The tenancy resolver's order (domain/context.ts (tenancy)), refusing nothing: the names the edge read (hooks/auth.ts registerProjectNames;
    // a multipart form's own, read by its handler), and for GraphQL the operation's arguments (a REST path id is the
    // service's to check).
    const graphql = req.routeOptions.url === '/graphql';
    const names = body === req.body ? req.ctx.project : readProjectNames(req.query, body, req.headers['x-svc-project']);
    const scope = idempotencyScope(req.ctx.caller, graphql && req.ctx.caller.kind === 'operator' ? graphqlProjectId(req.body) : null, names);
    // Who asks is part of the request: only the caller that made the first request (the same key id; the operator for
    // the operator's) gets it replayed. Any other key of the project, whatever its scopes, gets 409: a stored response
    // can hold a secret (a created key's svc_sk_…, a webhook's whsec_…) or the operator's view of every project. The
    // namespace stays the project (CONTRACT §5): the other caller's own request with that Idempotency-Key is refused,
    // not run.
    const caller = `${req.ctx.caller.kind} ${req.ctx.caller.keyId}`;
    const hash = oneShotHash('sha256', `${req.routeOptions.url}\n${req.url}\n${caller}\n${canonicalJson(body ?? null)}`, 'hex');
    const result = await store.begin(scope, key, hash, app.deps.clock.now());
    if (result.kind === 'conflict') {
      throw new SvcError('idempotency_conflict', {
        param: 'Idempotency-Key',
        message:
          result.reason === 'in_progress'
            ? 'A request with this Idempotency-Key is still being processed; retry after it finishes.'
            : 'This Idempotency-Key was already used in this project with a different request (another body, or another caller).',
      });
    }
    if (result.kind === 'replay') {
      // A replay is a request like any other (CONTRACT §7): inference defers its request to the token reservation,
      // which a replay never reaches, so it is taken here, and an exhausted window answers 429 instead of the replay.
      // (A conflict is thrown above: the error handler takes the deferred request the same way.)
      await req.rateLimitTicket?.takeDeferred();
      reply.header('Idempotent-Replayed', 'true');
      // A replayed error keeps its request id (X-Svc-Request-Id equals error.request_id, spec §7; GraphQL errors
      // too, even in a 200); a replayed success has this request's own id. The operator's X-Svc-Project is the project the request addressed (CONTRACT §2),
      // which no handler runs to find out this time.
      const original = originalErrorRequestId(result.body);
      if (original) reply.header('X-Svc-Request-Id', original);
      // A replayed dual_control_required names the same queued approval in its header too (CONTRACT §15).
      const approvalId = /"approval_id":"(apr_[0-9a-z]+)"/.exec(result.body)?.[1];
      if (approvalId) reply.header('X-Svc-Approval-Id', approvalId);
      // Only a project id: the scope may come from a body that named no real project (and must never reach a header raw).
      if (req.ctx.caller.kind === 'operator' && isId('prj', scope)) addressed(req.ctx, scope);
      return reply.code(result.status).type('application/json; charset=utf-8').send(result.body);
    }
    req.idempotency = { scope, key };
  };
  app.decorate('beginIdempotency', begin);

  const onSend: IdempotencyHooks['finish'] = (req, reply, payload, done) => {
    if (!req.idempotency) return done(null, payload);
    return finish(req, reply, payload);
  };

  const finish = async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const idem = req.idempotency!;
    req.idempotency = undefined;
    if (runAgain(reply.statusCode) || typeof payload !== 'string' || (req.routeOptions.url === '/graphql' && graphqlRunAgain(payload))) {
      await store.abandon(idem.scope, idem.key);
    } else {
      const kept = keptAnswer(req, reply.statusCode, payload);
      await store.complete(idem.scope, idem.key, kept.status, kept.body);
    }
    return payload;
  };
  return { begin: preValidation, finish: onSend };
}
