import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { expectScopeRequired } from '../helpers/security.ts';
import { expectOneOutcome, user, writeProvidersFile } from './fixtures.ts';
import type { Provider } from '../../src/providers/types.ts';

/** CONTRACT §9 on the wire: the whole chat request, /v1/responses, /v1/embeddings, and what no route can carry. */

let t: TestApp;
let operator: Client;
let api: Client;
let projectId: string;
let wire: MockOpenAI;

const tools = [
  {
    type: 'function',
    function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } },
  },
];

beforeAll(async () => {
  wire = await startMockOpenAI();
  const file = writeProvidersFile({
    providers: [
      { name: 'w', kind: 'openai', base_url: wire.url, region: 'local', models: [{ id: 'wire-chat', input_per_mtok: 1, output_per_mtok: 1 }] },
      {
        name: 'a',
        kind: 'mock',
        region: 'local',
        models: [
          { id: 'chat-1', input_per_mtok: 1, output_per_mtok: 1 },
          { id: 'embed-1', type: 'embedding', input_per_mtok: 2, output_per_mtok: 0 },
        ],
      },
      { name: 'b', kind: 'mock', region: 'local', models: [{ id: 'chat-1', input_per_mtok: 2, output_per_mtok: 2 }] },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  operator = client(t.app);
  const seeded = await seedProject(operator, { plan: 'growth', scopes: ['inference:write', 'models:read'] });
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
}, 240_000);
afterAll(async () => {
  await t.close();
  await wire.close();
});

describe('the whole chat-completions request', () => {
  it('answers tool calls on /v1/inference, and in its stream as indexed deltas', async () => {
    const res = await api.post('/v1/inference', { model: 'chat-1', project_id: projectId, messages: user('find it'), tools });
    expect(res.status).toBe(200);
    expect(res.body.finish_reason).toBe('tool_calls');
    expect(res.body.message).toEqual({
      role: 'assistant',
      content: '',
      tool_calls: [{ id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'lookup', arguments: '{"q":"q"}' } }],
    });
    const streamed = await api.post('/v1/inference', { model: 'chat-1', project_id: projectId, messages: user('find it'), tools, stream: true });
    const deltas = streamed.raw
      .split('\n\n')
      .filter((e: string) => e.startsWith('event: delta'))
      .map((e: string) => JSON.parse(e.split('data: ')[1]!).delta);
    expect(deltas[0].tool_calls[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'lookup', arguments: '' } });
    expect(deltas.slice(1).map((d: any) => d.tool_calls[0].function.arguments).join('')).toBe('{"q":"q"}');
    expect(streamed.raw).toContain('"tool_calls":[{"id":"call_');
  });

  it('gives n choices and logprobs on /v1/chat/completions', async () => {
    const res = await api.post('/v1/chat/completions', { model: 'chat-1', messages: user('two of us'), n: 2, logprobs: true, top_logprobs: 1 });
    expect(res.status).toBe(200);
    expect(res.body.choices.map((c: any) => [c.index, c.message.content, c.finish_reason])).toEqual([
      [0, 'two of us', 'stop'],
      [1, 'two of us', 'stop'],
    ]);
    expect(res.body.choices[0].logprobs.content.map((l: any) => l.token)).toEqual(['two ', 'of ', 'us']);
  });

  it('keys the response cache on tools: two requests differing only in tools are two entries', async () => {
    const body = { model: 'chat-1', messages: user('cache me'), cache: true };
    const other = [{ type: 'function', function: { name: 'other' } }];
    expect((await api.post('/v1/chat/completions', { ...body, tools })).headers['x-svc-cache']).toBe('miss');
    expect((await api.post('/v1/chat/completions', { ...body, tools: other })).headers['x-svc-cache']).toBe('miss');
    const hit = await api.post('/v1/chat/completions', { ...body, tools });
    expect(hit.headers['x-svc-cache']).toBe('hit');
    // A hit gives the tool calls back.
    expect(hit.body.choices[0].message.tool_calls[0].function.name).toBe('lookup');
    expect((await api.post('/v1/chat/completions', { ...body, tools, tool_choice: 'none' })).headers['x-svc-cache']).toBe('miss');
  });

  it('counts tool definitions in the token reservation', async () => {
    const p = await seedProject(operator, { scopes: ['inference:write'] });
    const pApi = client(t.app, p.secret);
    expect((await operator.put(`/v1/projects/${p.projectId}/rate-limits`, { requests_per_minute: 100, tokens_per_minute: 4000, burst: 0 })).status).toBe(200);
    // About 2000 tokens used (the mock reports a token per 4 characters); the clock stands still, so they stay used.
    expect((await pApi.post('/v1/chat/completions', { model: 'chat-1', messages: user('y'.repeat(8000)), max_tokens: 1 })).status).toBe(200);
    // A tool definition of about 3000 tokens does not fit in what is left; the same request without it does.
    const big = [{ type: 'function', function: { name: 'big', description: 'word '.repeat(3000) } }];
    expectError(await pApi.post('/v1/chat/completions', { model: 'chat-1', messages: user('x'), max_tokens: 10, tools: big }), 429, 'rate_limit_exceeded');
    expect((await pApi.post('/v1/chat/completions', { model: 'chat-1', messages: user('x'), max_tokens: 10 })).status).toBe(200);
  });

  it('skips the routes whose kind cannot carry a field, and refuses the field when none can', async () => {
    const [routeA, routeB] = t.deps.providers.routesForModel('chat-1');
    const refuseBias: Provider['unsupported'] = (req) => (req.options?.logit_bias ? 'logit_bias' : null);
    (routeA!.provider as { unsupported?: Provider['unsupported'] }).unsupported = refuseBias;
    try {
      const skipped = await api.post('/v1/chat/completions', { model: 'chat-1', messages: user('bias'), logit_bias: { '50256': -100 } });
      expect(skipped.status).toBe(200);
      expect(skipped.body.svc.route).toBe('b/chat-1');
      expect((await api.post('/v1/chat/completions', { model: 'chat-1', messages: user('plain') })).body.svc.route).toBe('a/chat-1');
      (routeB!.provider as { unsupported?: Provider['unsupported'] }).unsupported = refuseBias;
      const refused = await api.post('/v1/chat/completions', { model: 'chat-1', messages: user('bias'), logit_bias: { '50256': -100 } });
      expectError(refused, 400, 'invalid_request', 'logit_bias');
      expect(refused.body.error.message).toContain('logit_bias is not supported by the provider kind (mock) serving chat-1');
      // Like any routing failure, it is a finished inference: a failed usage record.
      await expectOneOutcome(t, refused.body.error.request_id, { status: 'failed', errorCode: 'invalid_request' });
    } finally {
      delete (routeA!.provider as { unsupported?: unknown }).unsupported;
      delete (routeB!.provider as { unsupported?: unknown }).unsupported;
    }
  });
});

describe('POST /v1/responses', () => {
  it('answers a Response object and records the usage', async () => {
    const res = await api.post('/v1/responses', { model: 'chat-1', input: 'hello there', instructions: 'Be kind.', max_output_tokens: 50 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^inf_/),
      object: 'response',
      status: 'completed',
      model: 'chat-1',
      instructions: 'Be kind.',
      max_output_tokens: 50,
      store: false,
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'hello there', annotations: [] }] }],
      usage: { input_tokens: expect.any(Number), output_tokens: 3 },
    });
    await expectOneOutcome(t, res.body.svc.request_id, { status: 'succeeded', route: 'a/chat-1' });
  });

  it('answers JSON for text.format json_schema, and a cut answer is incomplete', async () => {
    const res = await api.post('/v1/responses', {
      model: 'chat-1',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'x' }] }],
      text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } } },
    });
    expect(res.body.output[0].content[0].text).toBe('{"ok":true}');
    const cut = await api.post('/v1/responses', { model: 'chat-1', input: 'a long answer that will not fit', max_output_tokens: 1 });
    expect(cut.body).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
  });

  it('streams an error event and response.failed when the provider fails mid-stream, recorded as failed', async () => {
    wire.set({ streamError: () => 'upstream broke' });
    try {
      const res = await api.post('/v1/responses', { model: 'wire-chat', input: 'x', stream: true });
      expect(res.status).toBe(200);
      const events = res.raw.split('\n\n').filter(Boolean).map((e: string) => e.split('\n')[0]);
      expect(events).toEqual(['event: response.created', 'event: response.in_progress', 'event: error', 'event: response.failed']);
      const failed = JSON.parse(res.raw.split('event: response.failed\ndata: ')[1]!.split('\n')[0]!);
      expect(failed.response).toMatchObject({ status: 'failed', error: { code: 'model_unavailable' } });
      await expectOneOutcome(t, res.headers['x-svc-request-id'] as string, { status: 'failed', errorCode: 'model_unavailable' });
    } finally {
      wire.reset();
    }
  });

  it('passes tools and response_format on to an openai-kind provider as given', async () => {
    const format = { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] } } };
    const res = await api.post('/v1/chat/completions', { model: 'wire-chat', messages: user('x'), tools, tool_choice: 'auto', response_format: format, seed: 7, logit_bias: { '1': 5 }, user: 'u1' });
    expect(res.status).toBe(200);
    expect(wire.requests.at(-1)!.body).toMatchObject({ tools, tool_choice: 'auto', response_format: format, seed: 7, logit_bias: { '1': 5 }, user: 'u1' });
  });

  it('refuses what needs retention or is not a function tool, naming the field', async () => {
    // store: true works under standard retention (test/privacy); an unknown previous response is still refused.
    expectError(await api.post('/v1/responses', { model: 'chat-1', input: 'x', previous_response_id: 'inf_x' }), 400, 'invalid_request', 'previous_response_id');
    expectError(await api.post('/v1/responses', { model: 'chat-1', input: 'x', tools: [{ type: 'web_search' }] }), 400, 'invalid_request', 'tools[0].type');
    expectError(await api.post('/v1/responses', { model: 'chat-1', input: [{ type: 'item_reference', id: 'msg_1' }] }), 400, 'invalid_request', 'input[0]');
    expectError(await api.post('/v1/responses', { model: 'chat-1', input: [{ role: 'user', content: [{ type: 'input_text' }] }] }), 400, 'invalid_request', 'input[0].content[0].text');
    expectError(await api.post('/v1/responses', { model: 'embed-1', input: 'x' }), 400, 'invalid_request', 'model');
    expect((await api.post('/v1/responses', { model: 'chat-1', input: 'x', store: false })).status).toBe(200);
  });
});

describe('POST /v1/embeddings', () => {
  it('answers vectors in OpenAI\'s shape, charges the input tokens and records the usage', async () => {
    const res = await api.post('/v1/embeddings', { model: 'embed-1', input: ['alpha beta', 'gamma'] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'list', model: 'embed-1', usage: { prompt_tokens: 5, total_tokens: 5 } });
    expect(res.body.data.map((d: any) => [d.object, d.index, d.embedding.length])).toEqual([
      ['embedding', 0, 256],
      ['embedding', 1, 256],
    ]);
    // 5 tokens at 2 USD per million: 10 micro-dollars.
    await expectOneOutcome(t, res.body.svc.request_id, { status: 'succeeded', route: 'a/embed-1', promptTokens: 5, completionTokens: 0, costMicros: 10n });
    const b64 = await api.post('/v1/embeddings', { model: 'embed-1', input: 'alpha beta', encoding_format: 'base64', dimensions: 8 });
    const floats = new Float32Array(Uint8Array.from(Buffer.from(b64.body.data[0].embedding, 'base64')).buffer);
    expect(floats).toHaveLength(8);
    expect(Array.from(floats)[0]).toBeCloseTo(
      (await api.post('/v1/embeddings', { model: 'embed-1', input: 'alpha beta', dimensions: 8 })).body.data[0].embedding[0],
      6,
    );
  });

  it('refuses chat models, token arrays and too many dimensions; chat routes refuse embedding models', async () => {
    expectError(await api.post('/v1/embeddings', { model: 'chat-1', input: 'x' }), 400, 'invalid_request', 'model');
    expectError(await api.post('/v1/embeddings', { model: 'embed-1', input: [[1, 2, 3]] }), 400, 'invalid_request', 'input[0]');
    expectError(await api.post('/v1/embeddings', { model: 'embed-1', input: '' }), 400, 'invalid_request', 'input');
    expectError(await api.post('/v1/embeddings', { model: 'embed-1', input: 'x', encoding_format: 'hex' }), 400, 'invalid_request', 'encoding_format');
    expectError(await api.post('/v1/embeddings', { model: 'embed-1', input: 'x', dimensions: 512 }), 400, 'invalid_request');
    expectError(await api.post('/v1/chat/completions', { model: 'embed-1', messages: user('x') }), 400, 'invalid_request', 'model');
    expectError(await api.post('/v1/inference', { model: 'embed-1', project_id: projectId, messages: user('x') }), 400, 'invalid_request', 'model');
  });

  it('applies the project budget', async () => {
    const p = await seedProject(operator, { scopes: ['inference:write'] });
    await operator.put(`/v1/projects/${p.projectId}/budget`, { budget_usd: 0 });
    expectError(await client(t.app, p.secret).post('/v1/embeddings', { model: 'embed-1', input: 'x' }), 429, 'budget_exceeded');
  });
});

describe('models and scopes', () => {
  it('lists each model with its type', async () => {
    const res = await api.get('/v1/models');
    expect(res.body.data.map((m: any) => [m.id, m.svc.type])).toEqual([
      ['chat-1', 'chat'],
      ['embed-1', 'embedding'],
      ['wire-chat', 'chat'],
    ]);
  });

  it('needs inference:write', async () => {
    const weak = await seedProject(operator, { scopes: ['models:read'] });
    await expectScopeRequired(client(t.app, weak.secret), [
      { method: 'post', url: '/v1/responses', body: { model: 'chat-1', input: 'x' } },
      { method: 'post', url: '/v1/embeddings', body: { model: 'embed-1', input: 'x' } },
    ]);
  });
});
