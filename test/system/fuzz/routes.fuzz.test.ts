import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERRORS, isErrorCode } from '../../../src/errors/codes.ts';
import { MASTER_KEY, buildTestApp, client, seedProject, type TestApp } from '../../helpers/app.ts';

/**
 * Random JSON bodies, query strings, headers and path parameters thrown at every route the app declares (each
 * declares its action, or the app refuses to start). Only documented statuses and error codes may come
 * back, never a 500, never a secret.
 */
let t: TestApp;
let secrets: string[];
let keys: string[];
let projectId: string;

beforeAll(async () => {
  t = await buildTestApp();
  const seeded = await seedProject(client(t.app), {
    scopes: ['keys:manage', 'audit:read', 'inference:write', 'governance:manage', 'usage:read', 'budgets:manage', 'models:read'],
  });
  projectId = seeded.projectId;
  secrets = [MASTER_KEY, seeded.secret];
  keys = [MASTER_KEY, seeded.secret];
});
afterAll(() => t.close());

/** Every /v1 route the app declares (each declares its action: the canonical route list). */
const v1Routes = () =>
  [...t.app.routeActions.keys()]
    .map((r) => r.split(' ') as [string, string])
    .filter(([method, url]) => url.startsWith('/v1/') && method !== 'OPTIONS');

const segment = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.constantFrom('key_00000000000000000000000000', 'prj_x', 'wh_1', 'del_1', '..', '%00', '%2F', 'null'),
);
const headerValue = fc.string({ maxLength: 40 }).filter((s) => /^[\x20-\x7e]*$/.test(s));

describe('fuzzing every /v1 route', () => {
  it('answers only documented statuses and codes, never 500, never a secret', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...v1Routes()),
        fc.array(segment, { minLength: 3, maxLength: 3 }),
        fc.option(fc.jsonValue({ maxDepth: 3 }), { nil: undefined }),
        fc.dictionary(fc.constantFrom('limit', 'starting_after', 'ending_before', 'project_id', 'action', 'granularity', 'x'), fc.string({ maxLength: 12 })),
        fc.record({
          key: fc.constantFrom(0, 1, 2),
          idem: fc.option(headerValue, { nil: undefined }),
          project: fc.option(fc.oneof(headerValue, fc.constant(projectId)), { nil: undefined }),
        }),
        async ([method, pattern], params, body, query, h) => {
          let i = 0;
          const url = pattern.replace(/:[a-z_]+/g, () => encodeURIComponent(params[i++]!) || 'x');
          const headers: Record<string, string> = {};
          if (h.key < 2) headers.authorization = `Bearer ${keys[h.key]}`;
          if (h.idem !== undefined) headers['idempotency-key'] = h.idem;
          if (h.project !== undefined) headers['x-svc-project'] = h.project;
          if (body !== undefined) headers['content-type'] = 'application/json';
          const res = await t.app.inject({
            method: method as 'GET',
            url,
            query,
            headers,
            payload: body === undefined ? undefined : JSON.stringify(body),
          });
          expect(res.statusCode, `${method} ${url} ${res.body}`).not.toBe(500);
          for (const s of secrets) expect(res.body).not.toContain(s);
          if (res.statusCode >= 400) {
            const parsed = JSON.parse(res.body);
            // /v1/messages answers Anthropic's shape, the svc code in error.svc_code and the request id beside error.
            const code = parsed.type === 'error' ? parsed.error.svc_code : parsed.error.code;
            expect(isErrorCode(code), res.body).toBe(true);
            const expectedHttp = ERRORS[code as keyof typeof ERRORS].http;
            // 413 for an oversized body is the one status that differs from its code's row (CONTRACT §4).
            if (res.statusCode !== 413) expect(res.statusCode, res.body).toBe(expectedHttp);
            expect(res.headers['x-svc-request-id']).toBe(parsed.type === 'error' ? parsed.request_id : parsed.error.request_id);
          } else {
            expect(res.statusCode).toBeLessThan(300);
          }
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 400), seed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined },
    );
    for (const s of secrets) expect(t.logs.text).not.toContain(s);
  }, 120_000);

  it('answers random paths with 404 not_found', async () => {
    await fc.assert(
      // "." and ".." (also as %2E) are path navigation, not names: the URL parser resolves /v1/zz-/../.. to /, the home page.
      fc.asyncProperty(fc.array(segment.filter((p) => !/^(\.|%2e){1,2}$/i.test(p)), { minLength: 1, maxLength: 4 }), async (parts) => {
        const url = `/v1/zz-${parts.map((p) => encodeURIComponent(p)).join('/')}`;
        const res = await t.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${MASTER_KEY}` } });
        expect(res.statusCode).toBe(404);
        expect(JSON.parse(res.body).error.code).toBe('not_found');
      }),
      { numRuns: 100, seed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined },
    );
  });
});
