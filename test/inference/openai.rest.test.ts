import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectScopeRequired } from '../helpers/security.ts';
import { expectOneOutcome, writeProvidersFile } from './fixtures.ts';

let t: TestApp;
let operator: Client;
let api: Client;
let projectId: string;

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [
      {
        name: 'eu',
        kind: 'mock',
        region: 'eu-west-1',
        models: [
          { id: 'm-eu', input_per_mtok: 1, output_per_mtok: 1 },
          { id: 'org/m-both', input_per_mtok: 2, output_per_mtok: 2 },
        ],
      },
      {
        name: 'us',
        kind: 'mock',
        region: 'us-east-1',
        models: [
          { id: 'm-us', input_per_mtok: 1, output_per_mtok: 1 },
          { id: 'org/m-both', input_per_mtok: 1, output_per_mtok: 1 },
        ],
      },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  operator = client(t.app);
  const seeded = await seedProject(operator, { scopes: ['inference:write', 'models:read'] });
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
});
afterAll(() => t.close());

describe('POST /v1/chat/completions', () => {
  it("answers in OpenAI's shape, in the key's own project without project_id", async () => {
    const res = await api.post('/v1/chat/completions', {
      model: 'm-eu',
      messages: [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Hello ' }, { type: 'text', text: 'parts' }], name: 'ann' },
      ],
      max_completion_tokens: 100,
      user: 'end-user-1',
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^inf_/),
      object: 'chat.completion',
      created: Math.floor(t.clock.now() / 1000),
      model: 'm-eu',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello parts', refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: 3, total_tokens: expect.any(Number) },
      system_fingerprint: null,
      svc: { route: 'eu/m-eu', region: 'eu-west-1', cache_hit: false, cost_usd: expect.any(Number), request_id: res.headers['x-svc-request-id'] },
    });
    const record = await expectOneOutcome(t, res.body.svc.request_id, { status: 'succeeded', route: 'eu/m-eu' });
    expect(record.projectId).toBe(projectId);
  });

  it('the operator names the project with X-Svc-Project', async () => {
    const res = await operator.post('/v1/chat/completions', { model: 'm-eu', messages: [{ role: 'user', content: 'op' }] }, {
      headers: { 'x-svc-project': projectId },
    });
    expect(res.status).toBe(200);
    expectError(await operator.post('/v1/chat/completions', { model: 'm-eu', messages: [{ role: 'user', content: 'op' }] }), 400, 'missing_project_id');
  });

  it('refuses what it cannot honour, naming the parameter', async () => {
    const msg = [{ role: 'user', content: 'x' }];
    expectError(await api.post('/v1/chat/completions', { model: 'm-eu', messages: msg, n: 0 }), 400, 'invalid_request', 'n');
    expectError(await api.post('/v1/chat/completions', { model: 'm-eu', messages: msg, tools: [] }), 400, 'invalid_request', 'tools');
    expectError(
      await api.post('/v1/chat/completions', {
        model: 'm-eu',
        messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'x' } }] }],
      }),
      400,
      'invalid_request',
      'messages[0].content[0]',
    );
    expectError(await api.post('/v1/chat/completions', { model: 'm-eu', messages: [{ role: 'robot', content: 'x' }] }), 400, 'invalid_request', 'messages[0].role');
    expectError(await api.post('/v1/chat/completions', { model: 'm-eu', messages: [{ role: 'tool', content: 'x' }] }), 400, 'invalid_request', 'messages[0].tool_call_id');
    expectError(await api.post('/v1/chat/completions', { model: 'm-eu', messages: [] }), 400, 'invalid_request', 'messages');
    expectError(await api.post('/v1/chat/completions', { model: 'm-eu', messages: msg, max_completion_tokens: 0 }), 400, 'invalid_request', 'max_completion_tokens');
    expectError(
      await api.post('/v1/chat/completions', { model: 'm-eu', messages: msg, stream_options: { include_usage: true } }),
      400,
      'invalid_request',
      'stream_options',
    );
  });
});

describe('GET /v1/models', () => {
  it('lists every configured model with its routes and prices', async () => {
    const res = await api.get('/v1/models');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'list', has_more: false, url: '/v1/models' });
    expect(res.headers['x-svc-has-more']).toBe('false');
    expect(res.body.data.map((m: any) => m.id)).toEqual(['m-eu', 'm-us', 'org/m-both']);
    const both = res.body.data.find((m: any) => m.id === 'org/m-both');
    expect(both).toMatchObject({ object: 'model', owned_by: 'us' });
    expect(both.svc.routes).toEqual([
      { route: 'us/org/m-both', provider: 'us', region: 'us-east-1', input_per_mtok: 1, output_per_mtok: 1 },
      { route: 'eu/org/m-both', provider: 'eu', region: 'eu-west-1', input_per_mtok: 2, output_per_mtok: 2 },
    ]);
  });

  it("shows a pinned project only its region's models", async () => {
    const eu = await seedProject(operator, { region: 'eu-west-1', scopes: ['models:read'] });
    const res = await client(t.app, eu.secret).get('/v1/models');
    expect(res.body.data.map((m: any) => m.id).sort()).toEqual(['m-eu', 'org/m-both']);
    expect(res.body.data.find((m: any) => m.id === 'org/m-both').svc.routes.map((r: any) => r.route)).toEqual(['eu/org/m-both']);
    expectError(await client(t.app, eu.secret).get('/v1/models/m-us'), 404, 'not_found', 'model');
  });

  it('retrieves one model, ids with a slash included', async () => {
    const res = await api.get('/v1/models/org/m-both');
    expect(res.status).toBe(200);
    expect(res.body.id).toBe('org/m-both');
    expectError(await api.get('/v1/models/nope'), 404, 'not_found', 'model');
  });

  it('needs models:read', async () => {
    const weak = await seedProject(operator, { scopes: ['inference:write'] });
    await expectScopeRequired(client(t.app, weak.secret), [
      { method: 'get', url: '/v1/models' },
      { method: 'get', url: '/v1/models/m-eu' },
    ]);
    const none = await seedProject(operator, { scopes: ['models:read'] });
    await expectScopeRequired(client(t.app, none.secret), [
      { method: 'post', url: '/v1/chat/completions', body: { model: 'm-eu', messages: [{ role: 'user', content: 'x' }] } },
    ]);
  });
});
