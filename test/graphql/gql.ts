import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { MASTER_KEY } from '../helpers/app.ts';

export interface GqlResponse {
  status: number;
  headers: Record<string, unknown>;
  body: any;
  raw: string;
}

/** POST /graphql with a Bearer key (null: none), as a dashboard would send it. */
export function gqlClient(app: FastifyInstance, defaultKey: string | null = MASTER_KEY) {
  return async (
    query: string,
    variables: Record<string, unknown> = {},
    opts: { key?: string | null; headers?: Record<string, string> } = {},
  ): Promise<GqlResponse> => {
    const key = opts.key === undefined ? defaultKey : opts.key;
    const res = await app.inject({
      method: 'POST',
      url: '/graphql',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json, application/json',
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...opts.headers,
      },
      payload: JSON.stringify({ query, variables }),
    });
    let body: any = null;
    try {
      body = JSON.parse(res.body);
    } catch {
      body = null;
    }
    return { status: res.statusCode, headers: res.headers, body, raw: res.body };
  };
}
export type Gql = ReturnType<typeof gqlClient>;

/**
 * A GraphQL error as the gateway shapes it (graphql/errors.ts): the spec's code, param and request_id in
 * extensions, with http_status the status REST would have answered. Execution errors come with HTTP 200.
 */
export function expectGqlError(res: GqlResponse, code: string, opts: { param?: string | null; httpStatus?: number; path?: string[] } = {}) {
  expect(res.body?.errors?.length, res.raw).toBeGreaterThan(0);
  const err = res.body.errors[0];
  expect({ code: err.extensions?.code, message: typeof err.message }).toEqual({ code, message: 'string' });
  expect(err.extensions.request_id).toMatch(/^req_/);
  expect(err.extensions.request_id).toBe(res.headers['x-svc-request-id']);
  expect(err.extensions.doc_url).toMatch(new RegExp(`/docs/errors#${code}$`));
  if (opts.param !== undefined) expect(err.extensions.param).toBe(opts.param);
  if (opts.httpStatus !== undefined) expect(err.extensions.http_status).toBe(opts.httpStatus);
  if (opts.path !== undefined) expect(err.path).toEqual(opts.path);
  return err;
}

export interface GqlProbe {
  /** The root field the probe calls; its error must be on this path. */
  field: string;
  query: string;
  variables?: Record<string, unknown>;
}

/** Each root field answers insufficient_scope (http_status 403) for a key without its scope, and data is null. */
export async function expectGqlScopeRequired(gql: Gql, key: string, probes: GqlProbe[]): Promise<void> {
  for (const p of probes) {
    const res = await gql(p.query, p.variables ?? {}, { key });
    expect({ field: p.field, status: res.status, code: res.body?.errors?.[0]?.extensions?.code }).toEqual({
      field: p.field,
      status: 200,
      code: 'insufficient_scope',
    });
    expectGqlError(res, 'insufficient_scope', { httpStatus: 403, path: [p.field] });
    expect(res.body.data?.[p.field] ?? null).toBeNull();
  }
}

/** Another project's ids look absent: not_found (http_status 404), never insufficient_scope, never the object. */
export async function expectGqlHiddenFrom(gql: Gql, key: string, probes: GqlProbe[]): Promise<void> {
  for (const p of probes) {
    const res = await gql(p.query, p.variables ?? {}, { key });
    expect({ field: p.field, code: res.body?.errors?.[0]?.extensions?.code }).toEqual({ field: p.field, code: 'not_found' });
    expectGqlError(res, 'not_found', { httpStatus: 404, path: [p.field] });
    expect(res.body.data?.[p.field] ?? null).toBeNull();
  }
}
