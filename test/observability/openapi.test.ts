import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import type { FastifyInstance } from 'fastify';
import { generateApi } from 'swagger-typescript-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printOpenApi } from '../../src/observability/openapi.ts';
import { buildTestApp, client, seedProject, type Seeded, type TestApp } from '../helpers/app.ts';

/**
 * The API's own description: OpenAPI 3.1 generated from the route schemas, valid, describing exactly the /v1 routes
 * the gateway serves, and good enough to generate a typed client that calls a running gateway.
 */
type Doc = { openapi: string; paths: Record<string, Record<string, { operationId: string; security?: unknown[] }>> };

let t: TestApp;
let doc: Doc;
let seeded: Seeded;

beforeAll(async () => {
  t = await buildTestApp();
  const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  doc = res.json();
  seeded = await seedProject(client(t.app));
});
afterAll(async () => {
  await t.close();
});

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
/** `/v1/keys/{key_id}`, `/v1/keys/:key_id` and a wildcard, alike. */
const shape = (url: string) => url.replace(/\{[^}]+\}|:[A-Za-z_]+|\*/g, '{}');

/** What the document and the gateway disagree on: routes served but not described, operations described but not served. */
export function compareWithRoutes(d: Doc, app: FastifyInstance): { undocumented: string[]; unserved: string[] } {
  const documented = new Set<string>();
  const unserved: string[] = [];
  for (const [p, ops] of Object.entries(d.paths)) {
    for (const method of Object.keys(ops).filter((m) => METHODS.includes(m))) {
      documented.add(`${method.toUpperCase()} ${shape(p)}`);
      const url = p.replace(/\{([^}]+)\}/g, ':$1').replace('/:model', '/*');
      if (!app.hasRoute({ method: method.toUpperCase() as 'GET', url })) unserved.push(`${method.toUpperCase()} ${p}`);
    }
  }
  const undocumented = [...app.routeActions.keys()]
    .filter((key) => key.split(' ')[1]!.startsWith('/v1/'))
    .filter((key) => {
      const [method, url] = key.split(' ') as [string, string];
      return !documented.has(`${method} ${shape(url)}`);
    });
  return { undocumented, unserved };
}

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const parsed = await SwaggerParser.validate(structuredClone(doc) as never);
    expect(Object.keys(parsed.paths ?? {}).length).toBeGreaterThan(15);
  });

  it('describes every /v1 route the gateway serves, and nothing it does not', () => {
    const { undocumented, unserved } = compareWithRoutes(doc, t.app);
    expect(undocumented).toEqual([]);
    expect(unserved).toEqual([]);
    // The comparison is not vacuous: a route taken out of the document is reported.
    const lacking = structuredClone(doc);
    delete lacking.paths['/v1/keys/{key_id}/revoke'];
    expect(compareWithRoutes(lacking, t.app).undocumented).toEqual(['POST /v1/keys/:key_id/revoke']);
    const extra = structuredClone(doc);
    extra.paths['/v1/nothing'] = { get: { operationId: 'getV1Nothing' } };
    expect(compareWithRoutes(extra, t.app).unserved).toEqual(['GET /v1/nothing']);
  });

  it('names each operation uniquely and says who may call it', () => {
    const ops = Object.values(doc.paths).flatMap((o) => Object.values(o));
    const ids = ops.map((o) => o.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.paths['/v1/projects']!.post!.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.paths['/v1/keys/{key_id}/revoke']!.post).toMatchObject({ operationId: 'postV1KeysKeyIdRevoke', summary: 'key.revoke', tags: ['key'] });
  });

  it('is what `npm run openapi:print` writes (paths sorted, deterministic)', () => {
    const printed = printOpenApi(t.app);
    expect(JSON.parse(printed)).toEqual(doc);
    expect(Object.keys(doc.paths)).toEqual([...Object.keys(doc.paths)].sort());
    expect(printOpenApi(t.app)).toBe(printed);
  });
});

describe('the API reference page', () => {
  it('serves swagger-ui from the package, with the document, and nothing from elsewhere', async () => {
    const page = await t.app.inject({ method: 'GET', url: '/docs/api/' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    expect(page.body).not.toMatch(/https?:\/\//);
    const bundle = await t.app.inject({ method: 'GET', url: '/docs/api/static/swagger-ui-bundle.js' });
    expect(bundle.statusCode).toBe(200);
    const init = await t.app.inject({ method: 'GET', url: '/docs/api/static/swagger-initializer.js' });
    expect(init.body).toContain('validatorUrl: null');
    const json = await t.app.inject({ method: 'GET', url: '/docs/api/json' });
    expect(json.json().paths).toEqual(doc.paths);
  });
});

describe('success bodies', () => {
  it('every 2xx answer of every /v1 operation has a schema with its properties (a raw download aside)', () => {
    const bare: string[] = [];
    for (const [url, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops as unknown as Record<string, { responses: Record<string, { content?: Record<string, { schema?: { properties?: object } }> }> }>)) {
        const success = Object.entries(op.responses).filter(([status]) => status.startsWith('2'));
        const described = success.length > 0 && success.every(([, r]) => Object.values(r.content ?? {}).some((c) => c.schema?.properties));
        if (!described) bare.push(`${method.toUpperCase()} ${url}`);
      }
    }
    // The MCP endpoint's GET and DELETE answer 405 only (stateless Streamable HTTP: no stream, no session), and say so.
    expect(bare.sort()).toEqual(['DELETE /v1/mcp/{server_id}', 'GET /v1/mcp/{server_id}', 'GET /v1/risk/evidence/{evidence_id}/content']);
    const responses = (url: string, method: string) => (doc.paths as unknown as Record<string, Record<string, { responses: Record<string, unknown> }>>)[url]![method]!.responses;
    for (const method of ['get', 'delete']) expect(Object.keys(responses('/v1/mcp/{server_id}', method))).toEqual(['405', '4XX', '5XX']);
    expect(responses('/v1/risk/evidence/{evidence_id}/content', 'get')['200']).toMatchObject({ content: { '*/*': { schema: { type: 'string', format: 'binary' } } } });
  });
});

describe('a client generated from the document', () => {
  it('type-checks, refuses a wrong call at compile time, and calls a running gateway', { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-openapi-client-'));
    // swagger-typescript-api: a fetch client with one typed method per operationId (runs offline, from the document).
    await generateApi({ spec: structuredClone(doc) as never, output: dir, fileName: 'api.ts', httpClientType: 'fetch', silent: true, extractRequestBody: true });
    writeFileSync(
      path.join(dir, 'good.ts'),
      `import { Api } from './api.ts';\nconst api = new Api({});\nvoid api.v1.postV1Inference({ model: 'mock-1', project_id: 'prj_x', messages: [] });\n`,
    );
    // Field access on a key, a webhook and an inference type-checks against the described bodies.
    writeFileSync(
      path.join(dir, 'fields.ts'),
      `import { Api } from './api.ts';\nconst api = new Api({});\n` +
        `export async function read() {\n` +
        `  const key = (await api.v1.getV1KeysKeyId('key_x')).data;\n  const s: string = key.id; const scopes: string[] = key.scopes; const at: number = key.created_at;\n` +
        `  const hook = (await api.v1.getV1WebhooksWebhookId('wh_x')).data;\n  const u: string = hook.url; const ev: string[] = hook.events;\n` +
        `  const inf = (await api.v1.postV1Inference({ model: 'mock-1', messages: [] })).data;\n  const c: string = inf.message.content; const cost: number = inf.cost_usd; const total: number = inf.usage.total_tokens;\n` +
        `  return [s, scopes, at, u, ev, c, cost, total];\n}\n`,
    );
    writeFileSync(path.join(dir, 'wrong-field.ts'), `import { Api } from './api.ts';\nconst api = new Api({});\nexport async function read() { return (await api.v1.getV1KeysKeyId('key_x')).data.no_such_field; }\n`);
    writeFileSync(path.join(dir, 'bad.ts'), `import { Api } from './api.ts';\nconst api = new Api({});\nvoid api.v1.postV1Inference({ model: 1, messages: [] });\n`);
    const tsc = path.resolve('node_modules/.bin/tsc');
    const flags = ['--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--lib', 'es2022,dom', '--allowImportingTsExtensions', '--skipLibCheck', '--ignoreConfig'];
    await promisify(execFile)(tsc, [...flags, path.join(dir, 'good.ts')]);
    await promisify(execFile)(tsc, [...flags, path.join(dir, 'fields.ts')]);
    const wrong = await promisify(execFile)(tsc, [...flags, path.join(dir, 'wrong-field.ts')]).then(() => null, (err: { stdout: string }) => err.stdout);
    expect(wrong).toMatch(/wrong-field\.ts.*no_such_field/s);
    const bad = await promisify(execFile)(tsc, [...flags, path.join(dir, 'bad.ts')]).then(() => null, (err: { stdout: string }) => err.stdout);
    expect(bad).toMatch(/bad\.ts.*Type 'number' is not assignable to type 'string'/s);

    const address = await t.app.listen({ host: '127.0.0.1', port: 0 });
    // Its types were checked above; here it runs (imported from where it was generated).
    const { Api } = (await import(path.join(dir, 'api.ts'))) as { Api: new (config: object) => any };
    const api = new Api({ baseUrl: address, securityWorker: () => ({ headers: { Authorization: `Bearer ${seeded.secret}` } }) });
    const projects = await api.v1.getV1Projects();
    expect(projects.status).toBe(200);
    expect(projects.data.data.map((p: { id: string }) => p.id)).toEqual([seeded.projectId]);
    const inference = await api.v1.postV1Inference({ model: 'mock-1', project_id: seeded.projectId, messages: [{ role: 'user', content: 'hello' }] });
    expect(inference.data).toMatchObject({ object: 'svc.inference', message: { role: 'assistant', content: 'hello' } });
    expect(inference.headers.get('x-svc-request-id')).toBe(inference.data.request_id);
    // An error comes back as the error object (the document's 4XX schema).
    const missing = await api.v1.getV1KeysKeyId('key_unknown').then(
      () => null,
      (r: { status: number; error: unknown }) => r,
    );
    expect(missing).toMatchObject({ status: 404, error: { error: { code: 'not_found', type: 'svc.error' } } });
  });
});
