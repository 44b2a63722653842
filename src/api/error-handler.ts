import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { newId } from '../db/ids.ts';
import { ERRORS, type ErrorCode } from '../errors/codes.ts';
import { SvcError } from '../errors/svc-error.ts';
import { errorBody, errorObject, routeErrorBody } from './error-body.ts';
import { isNulCharacterError } from '../db/client.ts';

interface AjvError {
  instancePath?: string;
  keyword?: string;
  params?: { missingProperty?: string; additionalProperty?: string };
  message?: string;
}

/**
 * For routes whose schema is still plain JSON Schema (ajv): the inference routes and the defaults of api/input.ts. A
 * TypeBox route schema is checked by domain/validation.ts (api/input.ts), whose SvcError already carries the param and
 * the schema's wording, the same GraphQL gets.
 * The request field a schema failure is about: `/scopes/0` is `scopes`; a missing or unknown property names itself.
 */
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

function send(reply: FastifyReply, status: number, code: ErrorCode, message: string, param: string | null, headers: Record<string, string> = {}, details: Record<string, string> = {}) {
  reply.headers(headers);
  return reply.code(status).type('application/json; charset=utf-8').send(routeErrorBody(reply.request, status, errorBody(reply.request, code, message, param, details)));
}

/**
 * A request body still arriving when an error is answered before it was read (a 413 on its Content-Length, an upload
 * refused for the caller's plan): what is left of it is read and dropped, so that a client still sending it (Node's
 * fetch, the openai SDK) reads the answer instead of failing with EPIPE. Bounded: past `maxBytes` more bytes or `maxMs`
 * (or a declared Content-Length over `maxBytes`) the connection is closed once the answer is out.
 */
export const UNREAD_BODY_DRAIN = Object.freeze({ maxBytes: 64 * 1024 * 1024, maxMs: 10_000 });

function drainUnreadBody(req: FastifyRequest, reply: FastifyReply): void {
  const raw = req.raw;
  // `complete` is Node's: the whole body has arrived (app.inject's request has no such flag, and nothing to drain).
  if (raw.complete !== false || raw.destroyed) return;
  if (Number(req.headers['content-length']) > UNREAD_BODY_DRAIN.maxBytes) {
    reply.header('connection', 'close');
    return;
  }
  // fastify's body reader asks for Connection: close on a body it refused; the body is read here instead.
  reply.removeHeader('connection');
  let seen = 0;
  const done = () => {
    clearTimeout(timer);
    raw.off('data', onData);
    raw.off('end', done);
    raw.off('close', done);
  };
  const giveUp = () => {
    done();
    // After the answer is written: end the connection, then drop it (whatever else arrives is not read).
    const socket = raw.socket as (typeof raw.socket & { destroySoon?: () => void }) | null;
    if (socket && !socket.destroyed) (socket.destroySoon ?? socket.end).call(socket);
  };
  const onData = (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > UNREAD_BODY_DRAIN.maxBytes) giveUp();
  };
  const timer = setTimeout(giveUp, UNREAD_BODY_DRAIN.maxMs);
  raw.on('data', onData);
  raw.once('end', done);
  raw.once('close', done);
  raw.resume();
}

/** The only place a REST error body is shaped: SvcError, fastify's validation and body errors, and everything else. */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(async (error: FastifyError | SvcError, req: FastifyRequest, reply: FastifyReply) => {
    drainUnreadBody(req, reply);
    let err = error;
    // A deferred request (inference) that failed before its token reservation: taken now, and an exhausted request
    // window answers 429 as if it had been taken first (it would have been, without the deferral).
    if (req.rateLimitTicket?.pending) {
      try {
        await req.rateLimitTicket.takeDeferred();
      } catch (refused) {
        err = refused as SvcError;
      }
    }
    if (err instanceof SvcError) {
      return send(reply, err.http, err.code, err.message, err.param, err.headers, err.details);
    }
    const fe = err as FastifyError & { validation?: AjvError[]; validationContext?: string };
    if (fe.validation && fe.validation.length > 0) {
      const first = fe.validation[0]!;
      const param = paramOf(first);
      return send(reply, 400, 'invalid_request', validationMessage(first, param, fe.validationContext), param);
    }
    switch (fe.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE': {
        // A route may name its own code for it (the RAG upload: 413 document_too_large, param content; a Dev diff: 409
        // diff_too_large, param diff), with that code's status.
        const own = (req.routeOptions.config as { bodyTooLarge?: { code: 'document_too_large' | 'diff_too_large'; param: string } } | undefined)?.bodyTooLarge;
        if (own) return send(reply, ERRORS[own.code].http, own.code, ERRORS[own.code].message, own.param);
        return send(reply, 413, 'invalid_request', 'The request body is larger than the limit.', null);
      }
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
    if (isNulCharacterError(err)) {
      return send(reply, 400, 'invalid_request', 'Text values must not contain the NUL character (\\u0000).', null);
    }
    req.log.error({ err }, 'unexpected error');
    return send(reply, 500, 'internal_error', ERRORS.internal_error.message, null);
  });

}

/**
 * Unknown routes: 404 not_found. A caller that sent a key is identified first, so the 404 carries the identity and
 * rate-limit headers like any authenticated response (spec 4.3, 8.1.6) and counts against its request window (an
 * exhausted window answers 429); a key that does not authenticate changes nothing: the route still does not exist.
 */
export function registerNotFoundHandler(app: FastifyInstance, identify?: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>): void {
  app.setNotFoundHandler(async (req, reply) => {
    if (identify && req.headers.authorization !== undefined) {
      try {
        await identify(req, reply);
      } catch (err) {
        if (err instanceof SvcError && err.code === 'rate_limit_exceeded') throw err;
      }
    }
    return send(reply, 404, 'not_found', `Unrecognized request URL (${req.method} ${req.url.split('?')[0]}).`, null);
  });
}

/**
 * fastify's `frameworkErrors`: errors of the router itself, before any hook. A path that is not valid percent-encoding
 * is 400 invalid_request; a path segment over 100 characters (longer than any id) names no object: 404 not_found.
 */
export function sendFrameworkError(error: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  reply.header('X-Svc-Request-Id', req.id);
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    void send(reply, 404, 'not_found', 'No object has an id that long (ids are at most 100 characters).', null);
    return;
  }
  void send(reply, 400, 'invalid_request', 'The URL is not valid: check its percent-encoding.', null);
}

/**
 * A request Node's HTTP parser refuses before fastify sees it (an unknown method, a malformed header, a header section
 * over 16 kB, a body not received within the request timeout): the spec's error object with its own request id, then
 * the connection is closed. `docBase` is SVC_PUBLIC_URL or the listening address (there is no Host to read).
 */
export function writeClientError(socket: Duplex, err: Error & { code?: string }, docBase: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
  const message =
    status === 431
      ? 'The request line or headers are too large.'
      : err.code === 'HPE_INVALID_METHOD'
        ? 'Unknown HTTP method.'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 'The request was not received in time.'
          : 'The request could not be read.';
  const id = newId('req');
  const body = JSON.stringify(errorObject('invalid_request', message, id, docBase));
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Svc-Request-Id: ${id}\r\nConnection: close\r\n\r\n${body}`,
  );
}
