import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectGqlError, gqlClient, type Gql } from '../graphql/gql.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';

/**
 * CONTRACT §22: a key's `models`. Two mock providers: `cheap` (mock-1, mock-embed-1) and `pricey` (mock-1 dearer,
 * mock-2), so that a list can pick a model, a provider, or a model through one provider, and `auto` (cheapest first)
 * would go elsewhere than the list allows.
 */

let t: TestApp;
let api: ReturnType<typeof client>;
let gql: Gql;
let origin: string;
let projectId: string;
/** A keys:manage key without a list, and a key limited to mock-1 (with every inference route's scope). */
let manager: string;
let onlyMock1: string;
let onlyMock1Id: string;

const user = (content: string) => [{ role: 'user', content }];

async function newKey(models: unknown, by = manager, scopes = ['inference:write', 'keys:manage', 'usage:read', 'models:read']) {
  return api.post('/v1/keys', { project_id: projectId, name: `k-${Math.random().toString(36).slice(2)}`, scopes, ...(models === undefined ? {} : { models }) }, { key: by });
}

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [
      {
        name: 'cheap',
        kind: 'mock',
        region: 'local',
        models: [
          { id: 'mock-1', input_per_mtok: 1, output_per_mtok: 1 },
          { id: 'mock-embed-1', type: 'embedding', input_per_mtok: 1, output_per_mtok: 0 },
        ],
      },
      {
        name: 'pricey',
        kind: 'mock',
        region: 'local',
        models: [
          { id: 'mock-1', input_per_mtok: 5, output_per_mtok: 5 },
          { id: 'mock-2', input_per_mtok: 9, output_per_mtok: 9 },
        ],
      },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  api = client(t.app);
  gql = gqlClient(t.app);
  ({ projectId, secret: manager } = await seedProject(api, { plan: 'growth', scopes: ['keys:manage', 'inference:write', 'usage:read', 'evals:write', 'models:read'] }));
  const limited = await newKey(['mock-1']);
  expect(limited.status).toBe(200);
  onlyMock1 = limited.body.secret;
  onlyMock1Id = limited.body.id;
}, 240_000);
afterAll(async () => {
  await t?.close();
});

describe('the key object', () => {
  it('carries the list as given (deduplicated), null when the key is not narrowed; audited with the key', async () => {
    const res = await newKey(['mock-1', 'pricey/*', 'cheap/mock-embed-1', 'mock-1']);
    expect(res.status).toBe(200);
    expect(res.body.models).toEqual(['mock-1', 'pricey/*', 'cheap/mock-embed-1']);
    expect((await api.get(`/v1/keys/${res.body.id}`)).body.models).toEqual(['mock-1', 'pricey/*', 'cheap/mock-embed-1']);
    const audit = await t.deps.db.auditEvent.findFirst({ where: { action: 'key.create', targetId: res.body.id } });
    expect((audit?.data as { models?: string[] }).models).toEqual(['mock-1', 'pricey/*', 'cheap/mock-embed-1']);
    const open = await newKey(null);
    expect(open.status).toBe(200);
    expect(open.body.models).toBeNull();
    expect((await newKey(undefined)).body.models).toBeNull();
  });

  it('shows the list on every answer that carries the key: rotate, revoke, list', async () => {
    const created = await newKey(['mock-2']);
    const rotated = await api.post(`/v1/keys/${created.body.id}/rotate`, { overlap_hours: 1 });
    expect(rotated.status, rotated.raw).toBe(200);
    expect(rotated.body.models).toEqual(['mock-2']);
    const revoked = await api.post(`/v1/keys/${created.body.id}/revoke`);
    expect(revoked.status, revoked.raw).toBe(200);
    expect(revoked.body).toMatchObject({ status: 'revoked', models: ['mock-2'] });
    const open = await newKey(null);
    expect((await api.post(`/v1/keys/${open.body.id}/revoke`)).body).toMatchObject({ status: 'revoked', models: null });
    const listed = await api.get('/v1/keys', { query: { project_id: projectId, limit: '100' } });
    expect(listed.body.data.find((k: { id: string }) => k.id === created.body.id).models).toEqual(['mock-2']);
  });

  it('refuses an empty list, a malformed entry or too many entries: 400 invalid_request, param models', async () => {
    for (const bad of [[], ['*'], ['mock-1', 'has space'], ['cheap/*/x'], ['/mock-1'], ['cheap/'], ['gpt-*'], ['x'.repeat(201)], 'mock-1', Array.from({ length: 101 }, (_, i) => `m-${i}`)]) {
      const res = await newKey(bad);
      expectError(res, 400, 'invalid_request', 'models');
    }
  });

  it('GraphQL createKey takes models and the key shows them (null: every model)', async () => {
    const create = 'mutation($input: CreateKeyInput!) { createKey(input: $input) { secret key { id models } } }';
    const res = await gql(create, { input: { projectId, name: 'gql-models', scopes: ['inference:write'], models: ['pricey/mock-2', 'mock-1'] } }, { key: manager });
    expect(res.body.data.createKey.key.models).toEqual(['pricey/mock-2', 'mock-1']);
    const read = await gql('query($id: ID!) { key(id: $id) { models } }', { id: res.body.data.createKey.key.id }, { key: manager });
    expect(read.body.data.key.models).toEqual(['pricey/mock-2', 'mock-1']);
    const open = await gql(create, { input: { projectId, name: 'gql-open', scopes: ['inference:write'] } }, { key: manager });
    expect(open.body.data.createKey.key.models).toBeNull();
    expectGqlError(await gql(create, { input: { projectId, name: 'gql-bad', scopes: ['inference:write'], models: ['a b'] } }, { key: manager }), 'invalid_request', { param: 'models', httpStatus: 400 });
  });
});

describe('the subset rule', () => {
  let parent: string;
  beforeAll(async () => {
    parent = (await newKey(['mock-1', 'pricey/*'])).body.secret;
  });

  it('a narrowed key mints keys within its list: the same entries, or provider/model under its provider/*', async () => {
    for (const ok of [['mock-1'], ['pricey/*'], ['pricey/mock-2', 'mock-1']]) {
      const res = await newKey(ok, parent);
      expect(res.status, JSON.stringify(ok)).toBe(200);
      expect(res.body.models).toEqual(ok);
    }
  });

  it('a key with more models, or with none listed (every model), is 403 insufficient_scope, param models', async () => {
    for (const beyond of [null, undefined, ['mock-2'], ['cheap/*'], ['mock-1', 'mock-embed-1']]) {
      expectError(await newKey(beyond, parent), 403, 'insufficient_scope', 'models');
    }
    expectError(
      await api.post('/v1/keys', { project_id: projectId, name: 'gql-beyond', scopes: ['inference:write'] }, { key: parent }),
      403,
      'insufficient_scope',
      'models',
    );
    const viaGql = await gql('mutation($input: CreateKeyInput!) { createKey(input: $input) { secret } }', { input: { projectId, name: 'gql-beyond', scopes: ['inference:write'], models: ['mock-2'] } }, { key: parent });
    expectGqlError(viaGql, 'insufficient_scope', { param: 'models', httpStatus: 403 });
  });

  it('a narrowed key cannot rotate a key with more models (it would get its secret): 403, param key_id', async () => {
    const wide = await newKey(null);
    expectError(await api.post(`/v1/keys/${wide.body.id}/rotate`, {}, { key: parent }), 403, 'insufficient_scope', 'key_id');
  });
});

describe('a key limited to mock-1', () => {
  it('is refused another model on /v1/chat/completions, /v1/inference, /v1/responses and /v1/embeddings: 403 insufficient_scope, param model', async () => {
    const key = { key: onlyMock1 };
    expectError(await api.post('/v1/chat/completions', { model: 'mock-2', messages: user('hi') }, key), 403, 'insufficient_scope', 'model');
    expectError(await api.post('/v1/chat/completions', { model: 'mock-2', messages: user('hi'), stream: true }, key), 403, 'insufficient_scope', 'model');
    expectError(await api.post('/v1/inference', { project_id: projectId, model: 'mock-2', messages: user('hi') }, key), 403, 'insufficient_scope', 'model');
    expectError(await api.post('/v1/responses', { model: 'mock-2', input: 'hi' }, key), 403, 'insufficient_scope', 'model');
    expectError(await api.post('/v1/embeddings', { model: 'mock-embed-1', input: 'hi' }, key), 403, 'insufficient_scope', 'model');
    // Its own model passes, on every one of them.
    expect((await api.post('/v1/chat/completions', { model: 'mock-1', messages: user('hi') }, key)).status).toBe(200);
    expect((await api.post('/v1/responses', { model: 'mock-1', input: 'hi' }, key)).status).toBe(200);
    // Nothing was charged for the refusals: the only usage records are the two answers.
    await t.deps.outcomes.flush();
    const records = await t.deps.db.usageRecord.findMany({ where: { keyId: onlyMock1Id } });
    expect(records.filter((r) => r.status === 'succeeded').map((r) => r.model).sort()).toEqual(['mock-1', 'mock-1']);
  });

  it('the official openai SDK gets a PermissionDeniedError naming the model', async () => {
    const sdk = new OpenAI({ apiKey: onlyMock1, baseURL: `${origin}/v1`, maxRetries: 0 });
    const err = await sdk.chat.completions.create({ model: 'mock-2', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((err as InstanceType<typeof OpenAI.PermissionDeniedError>).code).toBe('insufficient_scope');
    expect((err as InstanceType<typeof OpenAI.PermissionDeniedError>).param).toBe('model');
    const ok = await sdk.chat.completions.create({ model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] });
    expect(ok.model).toBe('mock-1');
  });

  it('@anthropic-ai/sdk: messages.create and countTokens of another model are PermissionDeniedError (permission_error, insufficient_scope, param model)', async () => {
    const sdk = new Anthropic({ apiKey: onlyMock1, baseURL: origin, maxRetries: 0 });
    const body = { model: 'mock-2', max_tokens: 8, messages: [{ role: 'user' as const, content: 'hi' }] };
    for (const call of [() => sdk.messages.create(body), () => sdk.messages.countTokens({ model: 'mock-2', messages: body.messages })]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
      expect((err as InstanceType<typeof Anthropic.PermissionDeniedError>).status).toBe(403);
      expect((err as { error: { error: unknown } }).error.error).toMatchObject({ type: 'permission_error', svc_code: 'insufficient_scope', param: 'model' });
    }
    const ok = await sdk.messages.create({ ...body, model: 'mock-1' });
    expect(ok.model).toBe('mock-1');
  });

  it('@google/genai: generateContent, countTokens and embedContent of another model are 403 PERMISSION_DENIED, reason insufficient_scope, param model', async () => {
    const sdk = new GoogleGenAI({ apiKey: onlyMock1, httpOptions: { baseUrl: origin } });
    for (const call of [
      () => sdk.models.generateContent({ model: 'mock-2', contents: 'hi' }),
      () => sdk.models.countTokens({ model: 'mock-2', contents: 'hi' }),
      () => sdk.models.embedContent({ model: 'mock-embed-1', contents: 'hi' }),
    ]) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(403);
      const body = JSON.parse((err as ApiError).message.slice((err as ApiError).message.indexOf('{')));
      expect(body.error.status).toBe('PERMISSION_DENIED');
      const info = body.error.details.find((d: { '@type': string }) => d['@type'] === 'type.googleapis.com/google.rpc.ErrorInfo');
      expect(info).toMatchObject({ reason: 'insufficient_scope', metadata: { param: 'model' } });
    }
    const ok = await sdk.models.generateContent({ model: 'mock-1', contents: 'hi' });
    expect(typeof ok.text).toBe('string');
  });

  it('GET /v1/models lists only its models; another model is 404', async () => {
    const res = await api.get('/v1/models', { key: onlyMock1 });
    expect(res.status).toBe(200);
    expect(res.body.data.map((m: { id: string }) => m.id)).toEqual(['mock-1']);
    expect((await api.get('/v1/models/mock-2', { key: onlyMock1 })).status).toBe(404);
    expect((await api.get('/v1/models', { key: manager })).body.data.map((m: { id: string }) => m.id)).toEqual(['mock-1', 'mock-2', 'mock-embed-1']);
  });

  it('an evaluation run naming another model (or judge model) is refused at creation: 403, param model / the judge field', async () => {
    const evalKey = (await newKey(['mock-1'], manager, ['inference:write', 'evals:write'])).body.secret;
    const cases = [{ messages: user('hi'), expected: 'x', assert: { type: 'contains' } }];
    expectError(await api.post('/v1/evals', { project_id: projectId, name: 'e', model: 'mock-2', cases }, { key: evalKey }), 403, 'insufficient_scope', 'model');
    const judged = [{ messages: user('hi'), assert: { type: 'llm_judge', judge_model: 'mock-2', rubric: 'ok' } }];
    expectError(await api.post('/v1/evals', { project_id: projectId, name: 'e', model: 'mock-1', cases: judged }, { key: evalKey }), 403, 'insufficient_scope', 'cases[0].assert.judge_model');
    expect((await api.post('/v1/evals', { project_id: projectId, name: 'e', model: 'mock-1', cases }, { key: evalKey })).status).toBe(200);
  });
});

describe('routing within the list', () => {
  it('auto only takes routes within the list: a provider/* entry, a provider/model entry, a model entry', async () => {
    // Cheapest first would be cheap/mock-1; each list leaves only the routes it names.
    const cases: [string[], string, string][] = [
      [['pricey/*'], 'auto', 'pricey/mock-1'],
      [['mock-2'], 'auto', 'pricey/mock-2'],
      [['pricey/mock-1'], 'mock-1', 'pricey/mock-1'],
      [['mock-1'], 'auto', 'cheap/mock-1'],
    ];
    for (const [models, model, route] of cases) {
      const secret = (await newKey(models)).body.secret;
      for (let i = 0; i < 3; i++) {
        const res = await api.post('/v1/inference', { project_id: projectId, model, messages: user(`hi ${i}`), cache: false }, { key: secret });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(res.body.route, `${models} ${model}`).toBe(route);
      }
    }
  });

  it('auto with no route in the list (only an embedding model listed, or a policy targeting none of it): 403, param model', async () => {
    const embedOnly = (await newKey(['mock-embed-1'])).body.secret;
    expectError(await api.post('/v1/inference', { project_id: projectId, model: 'auto', messages: user('hi') }, { key: embedOnly }), 403, 'insufficient_scope', 'model');
    // A project whose default policy targets mock-1 only: a key limited to mock-2 has nothing to route to.
    const other = await seedProject(api, { plan: 'growth', scopes: ['keys:manage', 'inference:write', 'governance:manage'] });
    const policy = await api.post('/v1/routing/policies', { project_id: other.projectId, name: 'm1', strategy: 'ordered', targets: [{ model: 'mock-1' }], is_default: true }, { key: other.secret });
    expect(policy.status, JSON.stringify(policy.body)).toBe(200);
    const mock2 = await api.post('/v1/keys', { project_id: other.projectId, name: 'm2', scopes: ['inference:write'], models: ['mock-2'] }, { key: other.secret });
    expectError(await api.post('/v1/chat/completions', { model: 'auto', messages: user('hi') }, { key: mock2.body.secret }), 403, 'insufficient_scope', 'model');
    // The same key may still name its model.
    expect((await api.post('/v1/chat/completions', { model: 'mock-2', messages: user('hi') }, { key: mock2.body.secret })).status).toBe(200);
  });
});
