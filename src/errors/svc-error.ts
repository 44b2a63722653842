import { ERRORS, type ErrorCode } from './codes.ts';

export interface SvcErrorOptions {
  param?: string | null;
  message?: string;
  cause?: unknown;
  /** Extra response headers, e.g. Retry-After on 429. */
  headers?: Record<string, string>;
  /** Extra members of the error object, e.g. dual_control_required's approval_id (REST body and GraphQL extensions). */
  details?: Record<string, string>;
}

/** The one error type services throw; the REST and GraphQL adapters turn it into the spec's error object. */
export class SvcError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly headers: Record<string, string>;
  readonly details: Record<string, string>;

  constructor(code: ErrorCode, opts: SvcErrorOptions = {}) {
    super(opts.message ?? ERRORS[code].message, { cause: opts.cause });
    this.name = 'SvcError';
    this.code = code;
    this.param = opts.param ?? null;
    this.headers = opts.headers ?? {};
    this.details = opts.details ?? {};
  }

  get http(): number {
    return ERRORS[this.code].http;
  }
}

export const invalid = (param: string | null, message: string) => new SvcError('invalid_request', { param, message });
