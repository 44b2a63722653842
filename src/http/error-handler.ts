import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ERRORS, type ErrorCode } from '../errors/codes.ts';
import { SvcError } from '../errors/svc-error.ts';
import { errorBody } from './error-body.ts';
import { takePendingRequest } from '../limits/requests.ts';

interface AjvError {
  instancePath?: string;
  keyword?: string;
  params?: { missingProperty?: string; additionalProperty?: string };
  message?: string;
}

/** The request field a schema failure is about: `/scopes/0` is `scopes`; a missing or unknown property names itself. */
function paramOf(err: AjvError): string | null {
  const fromPath = err.instancePath?.split('/').filter(Boolean)[0];
  const own = err.params?.missingProperty ?? err.params?.additionalProperty;
  if (fromPath && own) return fromPath;
  return own ?? fromPath ?? null;
}

function validationMessage(err: AjvError, param: string | null, context: string | undefined): string {
  if (err.keyword === 'additionalProperties') return `Unknown parameter: ${param}.`;
  if (err.keyword === 'required') return `Missing required parameter: ${param}.`;
  const where = context === 'body' || !context ? '' : ` (in ${context === 'querystring' ? 'query' : context})`;
  return `Invalid ${param ?? 'request'}${where}: ${err.message ?? 'invalid value'}.`;
}

function send(reply: FastifyReply, status: number, code: ErrorCode, message: string, param: string | null, headers: Record<string, string> = {}) {
  reply.headers(headers);
  return reply.code(status).type('application/json; charset=utf-8').send(errorBody(reply.request, code, message, param));
}

/** The only place a REST error body is shaped: SvcError, fastify's validation and body errors, and everything else. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(async (error: FastifyError | SvcError, req: FastifyRequest, reply: FastifyReply) => {
    let err = error;
    // A deferred request (inference) that failed before its token reservation: taken now, and an exhausted request
    // window answers 429 as if it had been taken first (it would have been, without the deferral).
    if (req.ctx?.requestPending) {
      try {
        await takePendingRequest(req.ctx);
      } catch (refused) {
        err = refused as SvcError;
      }
    }
    if (err instanceof SvcError) {
      return send(reply, err.http, err.code, err.message, err.param, err.headers);
    }
    const fe = err as FastifyError & { validation?: AjvError[]; validationContext?: string };
    if (fe.validation && fe.validation.length > 0) {
      const first = fe.validation[0]!;
      const param = paramOf(first);
      return send(reply, 400, 'invalid_request', validationMessage(first, param, fe.validationContext), param);
    }
    switch (fe.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return send(reply, 413, 'invalid_request', 'The request body is larger than the limit.', null);
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return send(reply, 400, 'invalid_request', 'Send the body as application/json.', null);
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return send(reply, 400, 'invalid_request', 'The body is not valid JSON.', null);
    }
    if (fe instanceof SyntaxError || (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500)) {
      // Other client errors fastify raises before a handler runs (bad JSON, bad content length, …).
      const status = fe.statusCode === 413 ? 413 : 400;
      return send(reply, status, 'invalid_request', 'The request could not be read.', null);
    }
    req.log.error({ err }, 'unexpected error');
    return send(reply, 500, 'internal_error', ERRORS.internal_error.message, null);
  });

  app.setNotFoundHandler((req, reply) =>
    send(reply, 404, 'not_found', `Unrecognized request URL (${req.method} ${req.url.split('?')[0]}).`, null),
  );
}
