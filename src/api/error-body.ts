import type { FastifyRequest } from 'fastify';
import { ERRORS, type ErrorCode } from '../errors/codes.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * A protocol's own error shape for its routes (Anthropic's `{type: "error", error}`, Google's `{error: {code,
     * message, status}}`): given the spec's error object and the HTTP status, what the route answers instead.
     */
    errorShape?: (body: ErrorBody, status: number) => unknown;
  }
}

export interface ErrorBody {
  error: {
    type: 'svc.error';
    code: ErrorCode;
    message: string;
    request_id: string;
    doc_url: string;
    param: string | null;
    /** dual_control_required: the queued approval (CONTRACT §15). */
    approval_id?: string;
  };
}

export function docsBase(req: FastifyRequest): string {
  return req.server.deps.config.publicUrl ?? `${req.protocol}://${req.host}`;
}

/** Where an error code is documented (the gateway's own /docs/errors page). */
export const docUrl = (base: string, code: string): string => `${base}/docs/errors#${code}`;

/** The spec's error object (§7); the only place its shape is written. */
export function errorObject(code: ErrorCode, message: string, requestId: string, base: string, param: string | null = null, details: Record<string, string> = {}): ErrorBody {
  return { error: { type: 'svc.error', code, message, request_id: requestId, doc_url: docUrl(base, code), param, ...details } };
}

/** The error object of a request fastify has read. */
export function errorBody(req: FastifyRequest, code: ErrorCode, message: string = ERRORS[code].message, param: string | null = null, details: Record<string, string> = {}): ErrorBody {
  return errorObject(code, message, req.id, docsBase(req), param, details);
}

/** What a route answers for an error: the spec's error object, or its protocol's shape of it (errorShape). */
export function routeErrorBody(req: FastifyRequest, status: number, body: ErrorBody): unknown {
  const shape = req.routeOptions?.config?.errorShape;
  return shape ? shape(body, status) : body;
}
