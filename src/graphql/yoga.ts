import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { createYoga, type Plugin, type YogaLogger } from 'graphql-yoga';
import type { Logger } from 'pino';
import type { Deps } from '../deps.ts';
import type { GraphQLContext } from './builder.ts';
import { isClientFault, maskError, useErrorShape } from './errors.ts';
import { docUrl, docsBase } from '../api/error-body.ts';
import { renderOfflineGraphiQL } from './graphiql.ts';
import { NoSchemaIntrospectionCustomRule } from './graphql-js.ts';
import { queryLimits } from './limits.ts';
import { schema } from './schema.ts';
import { parseJsonBodies } from '../api/input.ts';

export const GRAPHQL_PATH = '/graphql';
export const GRAPHIQL_PATH = '/graphiql';

type ServerContext = { req: FastifyRequest; reply: FastifyReply };

function yogaLogger(log: Logger): YogaLogger {
  // Yoga reports a masked error from two places; one log line per error is enough.
  const logged = new WeakSet<Error>();
  const write = (level: 'debug' | 'info' | 'warn' | 'error') => (...args: unknown[]) => {
    const [first, ...rest] = args;
    if (first instanceof Error) {
      // Client errors that maskError turns into invalid_request: unreadable GET parameters, a NUL the database refused.
      if (isClientFault(first)) return;
      if (logged.has(first)) return;
      logged.add(first);
      log[level]({ err: first }, 'graphql: unexpected error');
    } else {
      log[level]({ detail: rest.length ? rest : undefined }, `graphql: ${String(first)}`);
    }
  };
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
}

function isGraphQLRequestBody(body: unknown): boolean {
  return typeof body === 'object' && body !== null && !Array.isArray(body) && typeof (body as { query?: unknown }).query === 'string';
}

const disableIntrospection: Plugin = {
  onValidate({ addValidationRule }) {
    addValidationRule(NoSchemaIntrospectionCustomRule);
  },
};

/**
 * graphql-js appends " Did you mean …?" to validation and variable errors (an unknown field, argument, type, enum value
 * or input field), which names parts of the schema. With introspection off the schema is not public, so the
 * suggestion is dropped: the error still says what was wrong ("Cannot query field "kees" on type "Query".").
 * graphql-armor's block-field-suggestions covers validation errors only and misses "Did you mean the enum value …",
 * so this covers every error of the result, before useErrorShape reads the messages.
 */
const SUGGESTION = / Did you mean .*\?$/s;
export const hideSuggestions: Plugin = {
  onResultProcess({ result }) {
    if (Array.isArray(result) || !('errors' in result) || !result.errors) return;
    for (const error of result.errors) {
      if (SUGGESTION.test(error.message)) (error as { message: string }).message = error.message.replace(SUGGESTION, '');
    }
  },
};

/** What POST /graphql reads (README): a JSON request object, or the query itself as application/graphql. */
const POST_MEDIA_TYPES = new Set(['application/json', 'application/graphql']);
const mediaTypeOf = (contentType: string | undefined) => (contentType ?? '').split(';')[0]!.trim().toLowerCase();

/** What the editor starts with: no query and no header that would fail, only how to authenticate. */
export const GRAPHIQL_HINT = `# svc gateway GraphQL
#
# Every query needs a key. Open the Headers tab below and type:
#
#   { "Authorization": "Bearer svc_sk_<your key>" }
#
# (an API key has its scopes; the operator key sees every project). The page never
# stores it. Signed in to /admin with SSO instead? Add your session's CSRF token as
# "X-Svc-CSRF-Token" (GET /auth/session shows it); the cookie goes by itself.
#
# Then run, for example:  { viewer { keyId projectId scopes } }
`;

const graphiqlOptions = {
  title: 'svc gateway GraphQL',
  endpoint: GRAPHQL_PATH,
  defaultQuery: GRAPHIQL_HINT,
  // Empty: the key goes in the headers editor (see the hint) and is never stored by the page. A placeholder key would
  // fail every request, the schema's first fetch included.
  headers: '',
  shouldPersistHeaders: false,
  isHeadersEditorEnabled: true,
  defaultEditorToolsVisibility: 'headers' as const,
};

/** A browser opening /graphql (a GET that accepts HTML): answered with GraphiQL, no key needed to load the page. */
export function wantsGraphiQL(req: FastifyRequest): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  const accept = req.headers.accept ?? '';
  return /(^|,)\s*text\/html\s*(;|,|$)/i.test(accept);
}

export function createGraphQLServer(deps: Deps) {
  return createYoga<ServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    // The auth hook already authenticated the request and built its Ctx, exactly as for REST.
    context: ({ req }) => ({ ctx: req.ctx, ports: deps.ports }),
    maskedErrors: { maskError },
    graphiql: deps.config.production ? false : graphiqlOptions,
    renderGraphiQL: renderOfflineGraphiQL,
    landingPage: false,
    multipart: false,
    // No cross-origin access, as for /v1: the admin console is served by the gateway itself (yoga's default would
    // reflect any Origin with credentials allowed).
    cors: false,
    logging: yogaLogger(deps.log),
    plugins: [
      ...queryLimits(),
      ...(deps.config.graphqlIntrospection ? [] : [disableIntrospection, hideSuggestions]),
      useErrorShape(),
    ],
  });
}

/** An error of the HTTP request itself (yoga answers some with an empty body), in GraphQL's shape with the svc fields. */
function requestError(req: FastifyRequest, status: number, message: string): string {
  const extensions = { code: 'invalid_request', param: null, http_status: status, request_id: req.id, doc_url: docUrl(docsBase(req), 'invalid_request') };
  return JSON.stringify({ errors: [{ message, extensions }] });
}

/** What the /graphql JSON parser gives for a body that is not JSON: answered as a GraphQL request error. */
const INVALID_JSON = Symbol('invalid JSON');

const EMPTY_BODY_ERRORS: Record<number, string> = {
  406: 'Accept application/json or application/graphql-response+json.',
  415: 'Send the request as application/json (or the query as application/graphql).',
};

/**
 * /graphql inside fastify: behind the same request-id, auth (and rate-limit) hooks as /v1, so it carries the same
 * X-Svc-* headers. Fields check their own scopes (builder.ts); the route itself only needs a valid key.
 */
export const graphqlRoutes: FastifyPluginAsync = async (app) => {
  const yoga = createGraphQLServer(app.deps);

  // Bodies are yoga's to read (this plugin's scope only): the query as application/graphql, and any other media type
  // passed on as text so that yoga answers 415, which gets the errors[] shape below, instead of fastify's REST 400.
  // Invalid JSON is a GraphQL request error too (400 with errors[]).
  parseJsonBodies(app, () => ({ value: INVALID_JSON }));
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));

  const graphiql = !app.deps.config.production;
  const graphiqlPage = async (reply: FastifyReply) =>
    reply.type('text/html; charset=utf-8').send(await renderOfflineGraphiQL(graphiqlOptions));

  app.route({
    url: GRAPHQL_PATH,
    method: ['GET', 'POST', 'OPTIONS'],
    // Read by the auth hook (api/hooks/auth.ts): outside production, a browser's GET of /graphql loads GraphiQL with
    // no key; the queries the page sends still need one.
    // Each field checks its own action; a CORS preflight needs no key.
    config: { action: 'authenticated', publicWhen: (req) => req.method === 'OPTIONS' || (graphiql && wantsGraphiQL(req)) },
    handler: async (req, reply) => {
      if (graphiql && wantsGraphiQL(req)) return graphiqlPage(reply);
      // A JSON body that is not a GraphQL request object ({}, [], null, a number): yoga would read the consumed stream
      // again and call it invalid JSON.
      const body = req.body as unknown;
      // Only the media types README promises. Yoga itself would also run a form post (application/x-www-form-urlencoded,
      // which a browser sends cross-site without a preflight: CSRF once a cookie session exists) and
      // application/graphql+json; everything else is 415 in GraphQL's error shape, before anything is parsed or run.
      if (req.method === 'POST' && !POST_MEDIA_TYPES.has(mediaTypeOf(req.headers['content-type']))) {
        return reply.code(415).type('application/json; charset=utf-8').send(requestError(req, 415, EMPTY_BODY_ERRORS[415]!));
      }
      if (body === INVALID_JSON) {
        return reply.code(400).type('application/json; charset=utf-8').send(requestError(req, 400, 'The body is not valid JSON.'));
      }
      if (req.method === 'POST' && req.headers['content-type']?.startsWith('application/json') && !isGraphQLRequestBody(body)) {
        return reply
          .code(400)
          .type('application/json; charset=utf-8')
          .send(requestError(req, 400, 'Send a JSON object {query, variables?, operationName?} with query a string.'));
      }
      const response = await yoga.handleNodeRequestAndResponse(req, reply, { req, reply });
      response.headers.forEach((value, key) => {
        reply.header(key, value);
      });
      reply.status(response.status);
      // Buffered (no subscriptions or @defer here), so the send hooks see the body as text: idempotency stores it.
      const text = await response.text();
      // Yoga answers a body it cannot read (415) or an Accept it cannot serve (406) with an empty body: give it the shape.
      const emptyError = EMPTY_BODY_ERRORS[response.status];
      if (emptyError && text === '') return reply.type('application/json; charset=utf-8').send(requestError(req, response.status, emptyError));
      return reply.send(text);
    },
  });

  // A browser cannot send a Bearer key when it opens a page: GraphiQL itself is public outside production (GET
  // /graphql accepting HTML, above, and /graphiql), and the key goes into its headers editor for the queries it sends.
  // /graphiql: the same page under its older address.
  if (graphiql) app.get(GRAPHIQL_PATH, { config: { action: 'public' } }, async (_req, reply) => graphiqlPage(reply));
};
