import type { FastifyInstance, FastifyRequest, FastifySchemaCompiler, RouteOptions } from 'fastify';
import type { TSchema } from 'typebox';
import { parseInput, parseTextInput } from '../domain/validation.ts';
import { SvcError, invalid } from '../errors/svc-error.ts';

/**
 * A request's input, from its bytes to a checked value: the JSON body parser, the validator compiler (a route's
 * TypeBox schema checked by the domain's parser), and what no route schema says (the defaults of routes without one,
 * NUL characters, integers written loosely).
 */

// ---- the body ----

/**
 * The application/json parser of a fastify scope: an empty body is no body (curl -X POST on revoke), and a body that
 * is not JSON is handed to `invalid`, which decides how that scope answers it (REST: an error; GraphQL: a request
 * error in errors[]).
 */
export function parseJsonBodies(app: FastifyInstance, invalid: () => { error: Error } | { value: unknown }): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      const answer = invalid();
      if ('error' in answer) done(answer.error, undefined);
      else done(null, answer.value);
    }
  });
}

// ---- the route schema ----

/** Whether a route schema was built with TypeBox (its nodes carry a `~kind`), not written as plain JSON Schema. */
const isTypeBox = (schema: unknown): schema is TSchema =>
  typeof schema === 'object' && schema !== null && Object.prototype.hasOwnProperty.call(schema, '~kind');

/**
 * fastify's validator compiler: a TypeBox route schema (domain/<capability>/schema.ts) is checked by the same
 * parseInput the services call, so a bad value gets the same SvcError (code, param, message) on REST as on GraphQL;
 * query strings and path parameters are text, converted to the schema's types first. Plain JSON schemas go to
 * `fallback` (ajv).
 */
export function routeValidatorCompiler(fallback: FastifySchemaCompiler<any>): FastifySchemaCompiler<any> {
  return (route) => {
    const { schema, httpPart } = route;
    if (!isTypeBox(schema)) return fallback(route);
    const parse = httpPart === 'body' ? parseInput : parseTextInput;
    return (value: unknown) => {
      try {
        // A POST without a body (fastify: null) sends no parameters (as Stripe's API reads it): `{}`, so a missing required field is
        // named rather than the whole body refused.
        return { value: parse(schema, httpPart === 'body' && (value === undefined || value === null) ? {} : value) };
      } catch (error) {
        return { error: error as Error };
      }
    };
  };
}

// ---- what the schemas alone would let through ----

/**
 * What the routes' schemas alone would let through. A route with no query schema takes no query parameter but
 * `project_id` (CONTRACT §2: the operator may name the project in the query on any call); a POST with no body schema
 * takes an empty body or one with `project_id` only. Anything else is 400 invalid_request "Unknown parameter"
 * (README "Decisions beyond the spec"), as on routes with a schema.
 */
const DEFAULT_QUERY = { type: 'object', additionalProperties: false, properties: { project_id: { type: 'string' } } } as const;
const DEFAULT_BODY = { type: ['object', 'null'], additionalProperties: false, properties: { project_id: { type: ['string', 'null'] } } } as const;

/** Bodies where text goes to the provider, not to the database: chat messages may hold any character. */
const FREE_TEXT_BODY_FIELDS: Record<string, ReadonlySet<string>> = {
  '/v1/inference': new Set(['messages']),
  '/v1/chat/completions': new Set(['messages']),
  '/v1/responses': new Set(['input', 'instructions']),
  '/v1/embeddings': new Set(['input']),
  '/v1/messages': new Set(['messages', 'system', 'tools']),
  '/v1/messages/count_tokens': new Set(['messages', 'system', 'tools']),
  '/v1beta/models/*': new Set(['contents', 'systemInstruction', 'tools', 'generateContentRequest', 'content', 'requests']),
};

function isApiRoute(url: string): boolean {
  return url.startsWith('/v1/') || url.startsWith('/v1beta/');
}

/**
 * The top-level field of the first string (or key) under `value` holding U+0000: null when `value` itself is such a
 * string, undefined when there is none.
 */
function fieldWithNul(value: unknown, field: string | null, skip: ReadonlySet<string> | undefined, depth = 0): string | null | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? field : undefined;
  if (value === null || typeof value !== 'object' || depth > 32) return undefined;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const name = field ?? k;
    if (depth === 0 && skip?.has(k)) continue;
    if (k.includes('\u0000')) return name;
    const found = fieldWithNul(v, name, skip, depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** "key_id" → "key": the object a path parameter names. */
const objectOf = (param: string) => param.replace(/_id$/, '').replace(/_/g, ' ');

/**
 * PostgreSQL cannot store U+0000 in text, so no id, name or filter can hold it: a path id with it names no object
 * (404 not_found, as any unknown id), a query or body field with it is 400 invalid_request naming the field.
 */
function refuseNulCharacters(req: FastifyRequest): void {
  const route = req.routeOptions.url;
  if (route === undefined || !isApiRoute(route)) return;
  const params = req.params as Record<string, unknown> | undefined;
  const inPath = params ? fieldWithNul(params, null, undefined) : undefined;
  if (inPath !== undefined && inPath !== null) {
    throw new SvcError('not_found', { param: inPath, message: `No such ${objectOf(inPath)}.` });
  }
  const inQuery = fieldWithNul(req.query, null, undefined);
  const inBody = inQuery === undefined ? fieldWithNul(req.body, null, FREE_TEXT_BODY_FIELDS[route]) : undefined;
  const field = inQuery ?? inBody;
  if (field !== undefined) throw invalid(field, `${field ?? 'The request'} must not contain the NUL character (\\u0000).`);
}

/**
 * Query strings are text that the schema coerces; an integer parameter must still be written as one (`limit=1e1`,
 * `limit= 10` or `limit=10.0` are not integers: CONTRACT §4).
 */
function refuseLooseIntegers(req: FastifyRequest): void {
  const properties = (req.routeOptions.schema?.querystring as { properties?: Record<string, { type?: unknown }> } | undefined)?.properties;
  if (!properties) return;
  const query = req.query as Record<string, unknown>;
  for (const [name, prop] of Object.entries(properties)) {
    const raw = query[name];
    if (prop.type === 'integer' && typeof raw === 'string' && !/^-?\d+$/.test(raw)) {
      throw invalid(name, `${name} must be an integer.`);
    }
  }
}

export function registerStrictInput(app: FastifyInstance): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!isApiRoute(route.url)) return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    route.schema ??= {};
    if (route.schema.querystring === undefined) route.schema.querystring = DEFAULT_QUERY;
    if (methods.includes('POST') && route.schema.body === undefined) route.schema.body = DEFAULT_BODY;
  });
  // Synchronous (done callback): no promise per request. A throw is fastify's error path, as a rejection would be.
  app.addHook('preValidation', (req, _reply, done) => {
    refuseNulCharacters(req);
    refuseLooseIntegers(req);
    done();
  });
}
