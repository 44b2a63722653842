import type { FastifyRequest } from 'fastify';
import { GraphQLError } from './graphql-js.ts';
import type { Plugin } from 'graphql-yoga';
import { ERRORS } from '../errors/codes.ts';
import { SvcError } from '../errors/svc-error.ts';
import { docUrl, docsBase } from '../api/error-body.ts';
import { isNulCharacterError } from '../db/client.ts';

/** What every GraphQL error carries in `extensions`: the spec's error object (§7) minus what GraphQL already has. */
export type SvcErrorExtensions = {
  code: string;
  param: string | null;
  /** The status REST answers for the same error; the HTTP response itself follows GraphQL over HTTP. */
  http_status: number;
  request_id?: string;
  doc_url?: string;
};

function svcErrorOf(error: unknown): SvcError | null {
  let e: unknown = error;
  for (let i = 0; i < 5 && e; i++) {
    if (e instanceof SvcError) return e;
    e = (e as { originalError?: unknown }).originalError ?? (e as { cause?: unknown }).cause;
  }
  return null;
}

/** GraphQL's own errors about the request (and what they wrap, e.g. a scalar refusing a variable), not a failure. */
function isRequestError(error: GraphQLError): boolean {
  let e: unknown = error;
  for (let i = 0; i < 5 && e instanceof GraphQLError; i++) {
    if (!e.originalError) return true;
    e = e.originalError;
  }
  return false;
}

/** Extensions are a plain object: set in place, so yoga keeps the error as is (and does not log an expected one). */
function setExtensions(error: GraphQLError, extensions: Record<string, unknown>): GraphQLError {
  Object.assign(error.extensions as Record<string, unknown>, extensions);
  return error;
}

const originalOf = (error: unknown): unknown => (error as { originalError?: unknown } | null)?.originalError ?? error;

/** Yoga's parser refusing GET parameters that are not JSON (`variables=x`); a SyntaxError inside a resolver has a path. */
const isUnreadableParameters = (error: unknown): boolean =>
  (error as { path?: unknown } | null)?.path === undefined && originalOf(error) instanceof SyntaxError;

/** The client's errors that maskError answers as invalid_request and the yoga logger leaves out. */
export const isClientFault = (error: unknown): boolean => isUnreadableParameters(error) || isNulCharacterError(originalOf(error));

/**
 * The field a variable's value was refused for, by REST's name (CONTRACT §4: wrong types name the param):
 * `Variable "$i" got invalid value 2147483648 at "i.requestsPerMinute"; …` is requests_per_minute, and a missing or
 * unknown field of an input object names that field. The variable itself is the client's name, so it is left out;
 * a top-level variable's own error keeps param null.
 */
function variableParam(message: string): string | null {
  const variable = /^Variable "\$(\w+)" got invalid value /.exec(message)?.[1];
  if (!variable) return null;
  let path = new RegExp(` at "${variable}((?:\\.\\w+|\\[\\d+\\])+)"; `).exec(message)?.[1] ?? '';
  const field = /; Field "(\w+)" (?:of required type .* was not provided|is not defined by type .*)\.$/.exec(message)?.[1];
  if (field) path += `.${field}`;
  if (!path.startsWith('.')) return null;
  return path.slice(1).replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/**
 * Yoga's maskError: the only place a GraphQL error is shaped. A SvcError keeps its code, param and message; a
 * GraphQL error about the request (syntax, validation, depth and cost limits, bad variables) is invalid_request;
 * anything else becomes internal_error, and yoga logs the original with its stack.
 */
export function maskError(error: unknown): Error {
  const gqlError = error instanceof GraphQLError ? error : null;
  const svc = svcErrorOf(error);
  if (svc && gqlError && gqlError.message === svc.message) {
    return setExtensions(gqlError, { code: svc.code, param: svc.param, http_status: svc.http, ...svc.details });
  }
  if (svc) {
    return new GraphQLError(svc.message, {
      nodes: gqlError?.nodes,
      path: gqlError?.path,
      extensions: { code: svc.code, param: svc.param, http_status: svc.http, ...svc.details },
    });
  }
  if (gqlError && isRequestError(gqlError)) {
    // graphql-armor prefixes its refusals with "Syntax Error: " although the query parsed.
    gqlError.message = gqlError.message.replace(/^Syntax Error: (?=Query (depth|Cost) limit)/, '');
    // Yoga's own `extensions.http` stays: it sets the response status (400, 405 for a mutation over GET) and is
    // removed from the body.
    const status = (gqlError.extensions?.http as { status?: number } | undefined)?.status;
    return setExtensions(gqlError, { code: 'invalid_request', param: variableParam(gqlError.message), http_status: status ?? 400 });
  }
  if (isUnreadableParameters(error)) {
    return new GraphQLError('The request\'s variables or extensions are not valid JSON.', {
      extensions: { code: 'invalid_request', param: null, http_status: 400 },
    });
  }
  if (isNulCharacterError(originalOf(error))) {
    return new GraphQLError('Text values must not contain the NUL character (\\u0000).', {
      nodes: gqlError?.nodes,
      path: gqlError?.path,
      extensions: { code: 'invalid_request', param: null, http_status: 400 },
    });
  }
  return new GraphQLError(ERRORS.internal_error.message, {
    nodes: gqlError?.nodes,
    path: gqlError?.path,
    extensions: { code: 'internal_error', param: null, http_status: 500 },
  });
}

/**
 * The last step for every error of a response: errors yoga never passes to maskError (validation: unknown fields,
 * depth and cost refusals, bad variables) are shaped here the same way; then request_id (equal to X-Svc-Request-Id)
 * and doc_url are added, which maskError cannot know.
 */
export function useErrorShape(): Plugin<Record<string, unknown>, { req: FastifyRequest }> {
  return {
    onResultProcess({ result, setResult, serverContext }) {
      const req = serverContext.req;
      if (Array.isArray(result) || !('errors' in result) || !result.errors?.length) return;
      // No data: nothing ran (bad variables, say). GraphQL over HTTP answers such a request error with 400 to a
      // client that accepts application/graphql-response+json, as yoga does for syntax and validation errors, and
      // with 200 to a plain application/json client; an error during execution keeps 200 and partial data.
      const requestError = result.data === undefined || result.data === null;
      const errors = result.errors.map((error) => {
        const masked = (error.extensions as Partial<SvcErrorExtensions>)?.http_status === undefined ? maskError(error) : error;
        const ext = (masked as GraphQLError).extensions as Record<string, unknown>;
        // `spec: true` is yoga's mark for a status that only a graphql-response+json client gets (a 405 stays 405).
        if (requestError) {
          const http = ext.http as { status?: number; spec?: boolean } | undefined;
          if (!http) ext.http = { spec: true, status: 400 };
          else if (http.status === 400) http.spec = true;
        }
        return setExtensions(masked as GraphQLError, {
          request_id: req.id,
          doc_url: docUrl(docsBase(req), String(ext.code ?? 'internal_error')),
        });
      });
      setResult({ ...result, errors });
    },
  };
}
