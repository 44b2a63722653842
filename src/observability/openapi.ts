import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { accessOf, publicRoutes, type RouteAction } from '../api/hooks/auth.ts';

/** Where the API's own description is served (README "The API's description"). */
export const OPENAPI_PATH = '/openapi.json';
export const API_REFERENCE_PATH = '/docs/api';

const ERROR_SCHEMA = {
  type: 'object',
  description: 'The error object (docs/API.md §4; codes at /docs/errors).',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['type', 'code', 'message', 'request_id', 'doc_url'],
      properties: {
        type: { type: 'string', const: 'svc.error' },
        code: { type: 'string' },
        message: { type: 'string' },
        param: { type: ['string', 'null'] },
        request_id: { type: 'string' },
        doc_url: { type: 'string' },
      },
    },
  },
} as const;

/** `/v1/projects/:project_id/archive` → `postV1ProjectsProjectIdArchive`: unique, stable, readable as a method name. */
export function operationIdOf(method: string, url: string): string {
  const words = url
    .replace(/\*/g, 'wildcard')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean);
  return method.toLowerCase() + words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
}

/** A route's action as the tag that groups it: `routing_policy.update` → `routing_policy`. */
const tagOf = (action: string) => action.split('.')[0]!;

/**
 * The document is generated from the routes' own schemas (@fastify/swagger reads them as they are registered), so it
 * cannot describe a route the gateway does not serve, nor miss one: every /v1 route is in it, with its action (the
 * route declares) as tag and summary. Other routes (health, console, GraphQL, these pages) are left out.
 */
export async function registerOpenApi(app: FastifyInstance, version: string): Promise<void> {
  // The error object once, under components (referenced by every operation's 4XX and 5XX).
  app.addSchema({ $id: 'Error', ...ERROR_SCHEMA });
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'svc gateway API',
        version,
        description:
          'The REST API under /v1. Authenticate with `Authorization: Bearer svc_sk_…`. Errors are the error object below; ' +
          'every response carries X-Svc-Request-Id. Rules: docs/API.md; error codes: /docs/errors.',
      },
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'A project key or the operator key (svc_sk_…).' } },
      },
    },
    // Shared schemas by their $id (components/schemas/Error), not def-0.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
    // Registered routes in their order; transform only shapes the document, never the route's validation.
    transform: ({ schema, url, route }) => {
      const method = (Array.isArray(route.method) ? route.method[0] : route.method) as string;
      if (!url.startsWith('/v1/') || method === 'HEAD') return { schema: { ...schema, hide: true }, url };
      // A wildcard (a model id may contain "/") as a named path parameter: OpenAPI has no unnamed ones.
      const wildcard = url.endsWith('/*') ? (url.endsWith('/models/*') ? 'model' : 'path') : null;
      const action = (route.config as { action?: RouteAction } | undefined)?.action;
      const access = action === undefined ? undefined : accessOf(action);
      const scopes = access === undefined || access === 'public' || access === 'authenticated' ? [] : typeof access === 'string' ? [access] : access;
      return {
        url: wildcard ? `${url.slice(0, -1)}:${wildcard}` : url,
        schema: {
          ...schema,
          ...(wildcard
            ? { params: { type: 'object', required: [wildcard], properties: { [wildcard]: { type: 'string', description: 'The rest of the path; may contain "/".' } } } }
            : {}),
          operationId: operationIdOf(method, url),
          tags: action ? [tagOf(action)] : [],
          summary: action,
          description: scopes.length ? `Needs the scope ${scopes.join(' or ')}.` : 'Needs any valid key.',
          security: access === 'public' ? [] : [{ bearerAuth: [] }],
          response: {
            // The route's own success schemas (what fast-json-stringify writes), else a generic object.
            ...successSchemas(schema),
            '4xx': { description: 'The request failed; see error.code.', $ref: 'Error#' },
            '5xx': { description: 'internal_error, model_unavailable, routing_timeout.', $ref: 'Error#' },
          },
        },
      };
    },
  });

}

/**
 * A route's declared 2xx response schemas; a route that declares only other answers (the MCP endpoint's GET and
 * DELETE: 405) those; the generic object for a route that declares none.
 */
function successSchemas(schema: unknown): Record<string, unknown> {
  const declared = (schema as { response?: Record<string, unknown> } | undefined)?.response ?? {};
  const success = Object.entries(declared).filter(([status]) => status.startsWith('2'));
  if (success.length === 0 && Object.keys(declared).length > 0) return declared;
  if (success.length === 0) return { 200: { description: 'Success.', type: 'object', additionalProperties: true } };
  return Object.fromEntries(success.map(([status, body]) => [status, { description: 'Success.', ...(body as object) }]));
}

/** /openapi.json and the reference page (after the error handler, like every route). */
export async function registerOpenApiRoutes(app: FastifyInstance): Promise<void> {
  app.get(OPENAPI_PATH, { config: { action: 'public' }, schema: { hide: true } }, async (_req, reply) =>
    reply.type('application/json; charset=utf-8').send(printOpenApi(app)),
  );

  // Swagger UI from swagger-ui-dist's files inside the package: nothing is fetched from elsewhere (no validator badge).
  // Its pages and static files are public; the plugin registers them, so its scope gives them their action.
  await app.register(async (scope) => {
    publicRoutes(scope);
    await scope.register(fastifySwaggerUi, {
      routePrefix: API_REFERENCE_PATH,
      uiConfig: { deepLinking: true, tryItOutEnabled: false },
      validatorUrl: false,
      staticCSP:
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
      transformSpecification: (spec) => sortedDocument(spec as Record<string, unknown>),
      theme: { title: 'svc gateway API reference' },
    });
  });
}

/** Paths sorted, so that the committed copy diffs by route, not by registration order (merges move plugins around). */
function sortedDocument(doc: Record<string, unknown>): Record<string, unknown> {
  const paths = (doc.paths ?? {}) as Record<string, unknown>;
  const sorted: Record<string, unknown> = {};
  for (const p of Object.keys(paths).sort()) sorted[p] = paths[p];
  return { ...doc, paths: sorted };
}

/** The document as /openapi.json serves it and `npm run openapi:print` writes it. */
export function printOpenApi(app: FastifyInstance): string {
  return `${JSON.stringify(sortedDocument(app.swagger() as unknown as Record<string, unknown>), null, 2)}\n`;
}
