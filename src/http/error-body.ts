import type { FastifyRequest } from 'fastify';
import { ERRORS, type ErrorCode } from '../errors/codes.ts';

export interface ErrorBody {
  error: {
    type: 'svc.error';
    code: ErrorCode;
    message: string;
    request_id: string;
    doc_url: string;
    param: string | null;
  };
}

export function docsBase(req: FastifyRequest): string {
  return req.server.deps.config.publicUrl ?? `${req.protocol}://${req.host}`;
}

/** The spec's error object (§7); the only place its shape is written. */
export function errorBody(req: FastifyRequest, code: ErrorCode, message: string = ERRORS[code].message, param: string | null = null): ErrorBody {
  return {
    error: {
      type: 'svc.error',
      code,
      message,
      request_id: req.id,
      doc_url: `${docsBase(req)}/docs/errors#${code}`,
      param,
    },
  };
}
