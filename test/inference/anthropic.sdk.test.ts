import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildTestApp, client, MASTER_KEY, seedProject, type TestApp } from '../helpers/app.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../helpers/fake-anthropic.ts';
import { startFakeBedrock, type FakeBedrock } from '../helpers/fake-bedrock.ts';
import { startFakeGemini, type FakeGemini } from '../helpers/fake-gemini.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { expectOneOutcome, writeProvidersFile } from './fixtures.ts';

/**
 * CONTRACT §19: the Anthropic Messages API, called with the official `@anthropic-ai/sdk` against a running gateway
 * (ANTHROPIC_BASE_URL = the gateway, the svc key as the API key), routed to the built-in mock kind, to an openai-kind
 * provider (a local OpenAI-wire server) and to an anthropic-kind provider (the local Anthropic wire server).
 */

const A_KEY = 'sk-ant-gateway-key-0123456789';
const G_KEY = 'AIzaGatewayKey0123456789abcdefghijklmnop';
const AWS = { accessKeyId: 'AKIAGATEWAYTEST00001', secretAccessKey: 'gateway-secret' };
let t: TestApp;
let origin: string;
let secret: string;
let projectId: string;
let wire: MockOpenAI;
let claude: FakeAnthropic;
let gem: FakeGemini;
let br: FakeBedrock;

beforeAll(async () => {
  [wire, claude, gem, br] = await Promise.all([startMockOpenAI(), startFakeAnthropic(A_KEY), startFakeGemini(G_KEY), startFakeBedrock(AWS, 'eu-central-1')]);
  const file = writeProvidersFile({
    providers: [
      { name: 'builtin', kind: 'mock', region: 'local', models: [{ id: 'mock-1', input_per_mtok: 1, output_per_mtok: 2 }] },
      { name: 'wire', kind: 'openai', base_url: wire.url, region: 'local', timeout_ms: 5000, models: [{ id: 'wire-1', input_per_mtok: 1, output_per_mtok: 2 }] },
      { name: 'claude', kind: 'anthropic', base_url: claude.url, api_key_env: 'A_KEY', region: 'local', models: [{ id: 'claude-sonnet', input_per_mtok: 1, output_per_mtok: 1 }] },
      { name: 'gem', kind: 'gemini', base_url: gem.url, api_key_env: 'G_KEY', region: 'local', models: [{ id: 'gemini-flash', input_per_mtok: 1, output_per_mtok: 1 }] },
      {
        name: 'br',
        kind: 'bedrock',
        base_url: br.url,
        region: 'local',
        aws_region: 'eu-central-1',
        aws_access_key_id_env: 'AWS_ID',
        aws_secret_access_key_env: 'AWS_SECRET',
        models: [{ id: 'anthropic.claude-3-haiku-20240307-v1:0', input_per_mtok: 1, output_per_mtok: 1 }],
      },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1000', A_KEY, G_KEY, AWS_ID: AWS.accessKeyId, AWS_SECRET: AWS.secretAccessKey } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  ({ secret, projectId } = await seedProject(client(t.app), { plan: 'growth', scopes: ['inference:write', 'usage:read'] }));
}, 240_000);
afterAll(async () => {
  await t?.close();
  await Promise.all([wire?.close(), claude?.close(), gem?.close(), br?.close()]);
});
beforeEach(() => {
  claude.set({ text: 'Hello from Claude.' });
  gem.set({ text: 'Hello from Gemini.' });
  br.set({ text: 'Hello from Bedrock.' });
});

const sdk = (apiKey = secret) => new Anthropic({ baseURL: origin, apiKey, maxRetries: 0 });

const weatherTool: Anthropic.Tool = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

const kinds = [
  { via: 'the built-in mock kind', model: 'mock-1', route: 'builtin/mock-1', text: 'Say hello', fake: () => null },
  { via: 'an openai-kind provider', model: 'wire-1', route: 'wire/wire-1', text: 'Say hello', fake: () => null },
  { via: 'an anthropic-kind provider', model: 'claude-sonnet', route: 'claude/claude-sonnet', text: 'Hello from Claude.', fake: () => claude },
  { via: 'a gemini-kind provider', model: 'gemini-flash', route: 'gem/gemini-flash', text: 'Hello from Gemini.', fake: () => gem },
  { via: 'a bedrock-kind provider', model: 'anthropic.claude-3-haiku-20240307-v1:0', route: 'br/anthropic.claude-3-haiku-20240307-v1:0', text: 'Hello from Bedrock.', fake: () => br },
] as const;

describe.each(kinds)('@anthropic-ai/sdk through $via', ({ model, route, text, fake }) => {
  it('messages.create: a Message with text, end_turn, usage and a usage record', async () => {
    const { data: msg, response } = await sdk()
      .messages.create({ model, max_tokens: 64, system: 'Be brief.', messages: [{ role: 'user', content: 'Say hello' }] })
      .withResponse();
    expect(msg).toMatchObject({ type: 'message', role: 'assistant', model, stop_reason: 'end_turn', stop_sequence: null });
    expect(msg.content).toEqual([{ type: 'text', text: expect.stringContaining(text) }]);
    expect(msg.usage.input_tokens).toBeGreaterThan(0);
    expect(msg.usage.output_tokens).toBeGreaterThan(0);
    const requestId = response.headers.get('request-id')!;
    expect(requestId).toBe(response.headers.get('x-svc-request-id'));
    expect((msg as any).svc).toMatchObject({ route, request_id: requestId });
    await expectOneOutcome(t, requestId, { status: 'succeeded', route, promptTokens: msg.usage.input_tokens, completionTokens: msg.usage.output_tokens });
  });

  it('messages.create with tools: a tool_use block, then text once the tool_result is sent', async () => {
    fake()?.set({ toolCalls: [{ id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] });
    const first = await sdk().messages.create({ model, max_tokens: 256, tools: [weatherTool], tool_choice: { type: 'auto' }, messages: [{ role: 'user', content: 'Weather in Paris?' }] });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use')!;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather', input: { city: expect.any(String) } });
    expect(use.id).not.toBe('');

    fake()?.set({ text: 'It is sunny.' });
    const second = await sdk().messages.create({
      model,
      max_tokens: 256,
      tools: [weatherTool],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'It is sunny.' }] },
      ],
    });
    expect(second.stop_reason).toBe('end_turn');
    expect(second.content[0]).toMatchObject({ type: 'text' });
    if (model === 'claude-sonnet') {
      // The anthropic kind got the turn back in its own shape: the tool_use, then the tool_result opening the user turn.
      const sent = claude.last().body;
      expect(sent.messages.at(-2)).toEqual({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] });
      expect(sent.messages.at(-1)).toEqual({
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'It is sunny.' }],
      });
    }
    expect((second.content[0] as Anthropic.TextBlock).text).toContain('sunny');
  });

  it('messages.stream: finalMessage() assembles the streamed text and usage', async () => {
    const stream = sdk().messages.stream({ model, max_tokens: 64, messages: [{ role: 'user', content: 'Say hello' }] });
    const deltas: string[] = [];
    stream.on('text', (d) => deltas.push(d));
    const msg = await stream.finalMessage();
    expect(msg.stop_reason).toBe('end_turn');
    expect(msg.content).toHaveLength(1);
    expect((msg.content[0] as Anthropic.TextBlock).text).toContain(text);
    expect(deltas.join('')).toBe((msg.content[0] as Anthropic.TextBlock).text);
    expect(msg.usage.output_tokens).toBeGreaterThan(0);
    expect(msg.usage.input_tokens).toBeGreaterThan(0);
  });

  it('messages.stream with tools: the tool_use block with its input', async () => {
    fake()?.set({ toolCalls: [{ id: 'toolu_2', name: 'get_weather', input: { city: 'Oslo' } }] });
    const msg = await sdk()
      .messages.stream({ model, max_tokens: 64, tools: [weatherTool], tool_choice: { type: 'tool', name: 'get_weather' }, messages: [{ role: 'user', content: 'Weather in Oslo?' }] })
      .finalMessage();
    expect(msg.stop_reason).toBe('tool_use');
    expect(msg.content.filter((b) => b.type === 'tool_use')).toEqual([{ type: 'tool_use', id: expect.any(String), name: 'get_weather', input: { city: expect.any(String) } }]);
  });

  it('messages.countTokens: input_tokens from the gateway counter, more with tools', async () => {
    const plain = await sdk().messages.countTokens({ model, messages: [{ role: 'user', content: 'Say hello to the whole world' }] });
    expect(plain.input_tokens).toBeGreaterThan(5);
    const withTools = await sdk().messages.countTokens({ model, tools: [weatherTool], messages: [{ role: 'user', content: 'Say hello to the whole world' }] });
    expect(withTools.input_tokens).toBeGreaterThan(plain.input_tokens);
  });
});

describe('errors as the SDK typed exceptions, in Anthropic shape with the svc code', () => {
  it('a wrong key is AuthenticationError (401 authentication_error, invalid_api_key)', async () => {
    const err = await sdk('svc_wrong_key_0123456789').messages.create({ model: 'mock-1', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(err.status).toBe(401);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'authentication_error', svc_code: 'invalid_api_key' } });
    expect(err.requestID).toBe(err.headers.get('x-svc-request-id'));
  });

  it('a key without inference:write is PermissionDeniedError (403 permission_error, insufficient_scope)', async () => {
    const { secret: readOnly } = await seedProject(client(t.app), { scopes: ['usage:read'] });
    const err = await sdk(readOnly).messages.create({ model: 'mock-1', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(err.error.error).toMatchObject({ type: 'permission_error', svc_code: 'insufficient_scope' });
  });

  it('an exhausted request window is RateLimitError (429 rate_limit_error, rate_limit_exceeded)', async () => {
    const limited = await seedProject(client(t.app), { scopes: ['inference:write'], limits: { requests_per_minute: 1, tokens_per_minute: 100_000, burst: 0 } });
    const ok = await sdk(limited.secret).messages.create({ model: 'mock-1', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] });
    expect(ok.type).toBe('message');
    const err = await sdk(limited.secret).messages.create({ model: 'mock-1', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    expect(err.error.error).toMatchObject({ type: 'rate_limit_error', svc_code: 'rate_limit_exceeded' });
    expect(err.headers.get('retry-after')).toMatch(/^\d+$/);
  });

  it('an unknown model is BadRequestError naming model', async () => {
    const err = await sdk().messages.create({ model: 'no-such-model', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.error.error).toMatchObject({ type: 'invalid_request_error', svc_code: 'invalid_request', param: 'model' });
  });

  it('a field the schema refuses is BadRequestError naming it in the Anthropic request', async () => {
    const err = await sdk()
      .messages.create({ model: 'mock-1', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'document', source: {} } as any] }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.error.error).toMatchObject({ svc_code: 'invalid_request', param: 'messages[0].content[1]', message: expect.stringContaining('text, image, tool_use, tool_result') });
  });

  it('top_k and thinking go only to the anthropic kind: elsewhere 400 naming the field', async () => {
    for (const [extra, field] of [[{ top_k: 5 }, 'top_k'], [{ thinking: { type: 'enabled', budget_tokens: 2048 } }, 'thinking']] as const) {
      const err = await sdk().messages.create({ model: 'wire-1', max_tokens: 4096, messages: [{ role: 'user', content: 'x' }], ...extra }).catch((e) => e);
      expect(err).toBeInstanceOf(Anthropic.BadRequestError);
      expect(err.error.error).toMatchObject({ svc_code: 'invalid_request', param: field });
    }
  });

  it('a tool_result answering no tool_use is 400 naming its tool_use_id (anthropic kind)', async () => {
    const err = await sdk()
      .messages.create({ model: 'claude-sonnet', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_x', content: 'r' }] }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.error.error.param).toBe('messages[0].content[0].tool_use_id');
  });
});

describe('inference like any other', () => {
  it('a streamed answer leaves one usage record with its tokens and cost, and inference.completed', async () => {
    const stream = sdk().messages.stream({ model: 'wire-1', max_tokens: 64, messages: [{ role: 'user', content: 'Count these words please' }] });
    const msg = await stream.finalMessage();
    const requestId = (await stream.withResponse()).response.headers.get('request-id')!;
    const r = await expectOneOutcome(t, requestId, { status: 'succeeded', route: 'wire/wire-1', promptTokens: msg.usage.input_tokens, completionTokens: msg.usage.output_tokens });
    // 1 and 2 USD per million tokens.
    expect(r.costMicros).toBe(BigInt(msg.usage.input_tokens * 1 + msg.usage.output_tokens * 2));
  });

  it('budgets hold: once the month budget is spent, RateLimitError with billing_error / budget_exceeded', async () => {
    const p = await seedProject(client(t.app), { scopes: ['inference:write'], budgetUsd: 0.000001 });
    await sdk(p.secret).messages.create({ model: 'mock-1', max_tokens: 64, messages: [{ role: 'user', content: 'spend a little of the budget' }] });
    const err = await sdk(p.secret).messages.create({ model: 'mock-1', max_tokens: 8, messages: [{ role: 'user', content: 'more' }] }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    expect(err.error.error).toMatchObject({ type: 'billing_error', svc_code: 'budget_exceeded' });
  });

  it('PII redaction applies to text blocks and tool_result content before the provider sees them', async () => {
    const p = await seedProject(client(t.app), { scopes: ['inference:write'] });
    expect((await client(t.app).put(`/v1/projects/${p.projectId}/pii`, { redact: true })).status).toBe(200);
    await sdk(p.secret).messages.create({
      model: 'wire-1',
      max_tokens: 64,
      system: 'Reply to jane.doe@example.com',
      tools: [weatherTool],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Mail john.roe@example.com please' }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_p', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_p', content: 'Sent by max.mustermann@example.com' }] },
      ],
    });
    const sent = JSON.stringify(wire.requests.at(-1)!.body.messages);
    for (const mail of ['jane.doe@example.com', 'john.roe@example.com', 'max.mustermann@example.com']) expect(sent).not.toContain(mail);
    expect(sent).toContain('[EMAIL_');
  });

  it('text may hold any character (U+0000 included): it goes to the provider, not the database', async () => {
    const msg = await sdk().messages.create({ model: 'mock-1', max_tokens: 64, messages: [{ role: 'user', content: 'a\u0000b' }] });
    expect(msg.type).toBe('message');
  });
});

describe('thinking through the anthropic kind', () => {
  const thinkingRequest: Anthropic.MessageCreateParamsNonStreaming = {
    model: 'claude-sonnet',
    max_tokens: 4096,
    thinking: { type: 'enabled', budget_tokens: 2048 },
    tools: [weatherTool],
    messages: [{ role: 'user', content: 'Weather in Lima?' }],
  };

  it('messages.create returns the thinking block (signature included) before the tool_use', async () => {
    claude.set({ thinking: 'The user wants the weather.', toolCalls: [{ id: 'toolu_t', name: 'get_weather', input: { city: 'Lima' } }] });
    const msg = await sdk().messages.create(thinkingRequest);
    expect(msg.content).toEqual([
      { type: 'thinking', thinking: 'The user wants the weather.', signature: 'sig-27' },
      { type: 'tool_use', id: 'toolu_t', name: 'get_weather', input: { city: 'Lima' } },
    ]);
    expect(claude.last().body.thinking).toEqual({ type: 'enabled', budget_tokens: 2048 });
  });

  it('messages.stream streams thinking_delta and signature_delta; finalMessage() has the block to send back', async () => {
    claude.set({ thinking: 'Think about Lima.', toolCalls: [{ id: 'toolu_s', name: 'get_weather', input: { city: 'Lima' } }] });
    const stream = sdk().messages.stream(thinkingRequest);
    const kinds: string[] = [];
    stream.on('streamEvent', (e) => kinds.push(e.type === 'content_block_delta' ? `delta:${e.delta.type}` : e.type));
    const msg = await stream.finalMessage();
    expect(msg.content).toEqual([
      { type: 'thinking', thinking: 'Think about Lima.', signature: 'sig-17' },
      { type: 'tool_use', id: 'toolu_s', name: 'get_weather', input: { city: 'Lima' } },
    ]);
    expect(kinds.filter((k) => k.startsWith('delta:thinking')).length).toBeGreaterThan(0);
    expect(kinds).toContain('delta:signature_delta');

    // The next turn sends the thinking block back with the tool result: the anthropic kind gets it as sent.
    claude.set({ text: 'Cloudy in Lima.' });
    const next = await sdk().messages.create({
      ...thinkingRequest,
      messages: [
        ...thinkingRequest.messages,
        { role: 'assistant', content: msg.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_s', content: 'cloudy' }] },
      ],
    });
    expect(next.content).toEqual([{ type: 'text', text: 'Cloudy in Lima.' }]);
    expect(claude.last().body.messages[1].content[0]).toEqual({ type: 'thinking', thinking: 'Think about Lima.', signature: 'sig-17' });
  });
});

/** The SSE events of a response body: [event, data] in order. */
function parseSse(body: string): Array<[string, any]> {
  return body
    .split('\n\n')
    .filter((chunk) => chunk.trim() !== '')
    .map((chunk) => {
      const event = /^event: (.*)$/m.exec(chunk)![1]!;
      const data = JSON.parse(/^data: (.*)$/m.exec(chunk)![1]!);
      return [event, data] as [string, any];
    });
}

describe('a Claude Code style request (Bearer svc key, anthropic-version, anthropic-beta, streamed, with tools)', () => {
  const claudeCode = (model: string, extra: Record<string, unknown> = {}) =>
    fetch(`${origin}/v1/messages`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${secret}`,
        'anthropic-version': '2023-06-01',
        'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14',
        'content-type': 'application/json',
        'x-app': 'cli',
      },
      body: JSON.stringify({
        model,
        max_tokens: 32000,
        stream: true,
        system: [
          { type: 'text', text: "You are Claude Code, Anthropic's official CLI for Claude." },
          { type: 'text', text: 'Use the tools.', cache_control: { type: 'ephemeral' } },
        ],
        tools: [{ ...weatherTool, cache_control: { type: 'ephemeral' } }],
        metadata: { user_id: 'user_abc_account__session_1' },
        messages: [{ role: 'user', content: [{ type: 'text', text: 'Weather in Rome?', cache_control: { type: 'ephemeral' } }] }],
        ...extra,
      }),
    });

  it('answers exactly Anthropic event sequence on the mock kind', async () => {
    const res = await claudeCode('mock-1');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = parseSse(await res.text());
    const deltas = events.filter(([e]) => e === 'content_block_delta');
    expect(deltas.length).toBeGreaterThan(0);
    expect(events.map(([e]) => e)).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      ...deltas.map(() => 'content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    for (const [e, data] of events) expect(data.type).toBe(e);
    expect(events[0]![1].message).toMatchObject({ type: 'message', role: 'assistant', model: 'mock-1', content: [], stop_reason: null, usage: { output_tokens: 0 } });
    expect(events[2]![1]).toEqual({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: expect.any(String), name: 'get_weather', input: {} } });
    for (const [, d] of deltas) expect(d).toEqual({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: expect.any(String) } });
    expect(JSON.parse(deltas.map(([, d]) => d.delta.partial_json).join(''))).toEqual({ city: expect.any(String) });
    expect(events.at(-3)![1]).toEqual({ type: 'content_block_stop', index: 0 });
    expect(events.at(-2)![1]).toMatchObject({ delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: expect.any(Number) } });
  });

  it('passes anthropic-beta, cache_control and metadata.user_id on to the anthropic kind, and streams its answer back', async () => {
    claude.set({ text: 'Let me look.', toolCalls: [{ id: 'toolu_9', name: 'get_weather', input: { city: 'Rome' } }] });
    const res = await claudeCode('claude-sonnet', { top_k: 40, thinking: { type: 'enabled', budget_tokens: 2048 } });
    expect(res.status).toBe(200);
    const events = parseSse(await res.text());
    expect(events.map(([e, d]) => (d.delta?.type ? `${e}:${d.delta.type}` : e))).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      ...Array(events.filter(([, d]) => d.delta?.type === 'text_delta').length).fill('content_block_delta:text_delta'),
      'content_block_stop',
      'content_block_start',
      ...Array(events.filter(([, d]) => d.delta?.type === 'input_json_delta').length).fill('content_block_delta:input_json_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const text = events.filter(([, d]) => d.delta?.type === 'text_delta').map(([, d]) => d.delta.text).join('');
    const json = events.filter(([, d]) => d.delta?.type === 'input_json_delta').map(([, d]) => d.delta.partial_json).join('');
    expect(text).toBe('Let me look.');
    expect(JSON.parse(json)).toEqual({ city: 'Rome' });
    expect(events.at(-2)![1]).toMatchObject({ delta: { stop_reason: 'tool_use' }, usage: { input_tokens: 11, output_tokens: 7 } });

    const sent = claude.last();
    expect(sent.headers['anthropic-beta']).toBe('claude-code-20250219,interleaved-thinking-2025-05-14');
    expect(sent.headers['x-api-key']).toBe(A_KEY);
    expect(sent.body).toMatchObject({
      model: 'claude-sonnet',
      stream: true,
      top_k: 40,
      thinking: { type: 'enabled', budget_tokens: 2048 },
      metadata: { user_id: 'user_abc_account__session_1' },
      system: [
        { type: 'text', text: "You are Claude Code, Anthropic's official CLI for Claude." },
        { type: 'text', text: 'Use the tools.', cache_control: { type: 'ephemeral' } },
      ],
      tools: [{ name: 'get_weather', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Weather in Rome?', cache_control: { type: 'ephemeral' } }] }],
    });
  });

  it('turns cache_control into Converse cache points for the bedrock kind', async () => {
    const res = await claudeCode('anthropic.claude-3-haiku-20240307-v1:0', { stream: false });
    expect(res.status).toBe(200);
    const sent = br.last().body;
    expect(sent.system).toEqual([{ text: "You are Claude Code, Anthropic's official CLI for Claude.\n\nUse the tools." }, { cachePoint: { type: 'default' } }]);
    expect(sent.messages[0].content).toEqual([{ text: 'Weather in Rome?' }, { cachePoint: { type: 'default' } }]);
    expect(sent.toolConfig.tools).toEqual([{ toolSpec: expect.objectContaining({ name: 'get_weather' }) }, { cachePoint: { type: 'default' } }]);
  });

  it('drops cache_control and history thinking blocks for the openai kind', async () => {
    const res = await claudeCode('wire-1', {
      stream: false,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Weather in Rome?', cache_control: { type: 'ephemeral' } }] },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'The user wants weather.', signature: 'sig' }, { type: 'text', text: 'Checking.' }] },
        { role: 'user', content: 'Go on.' },
      ],
    });
    expect(res.status).toBe(200);
    const sent = wire.requests.at(-1)!.body;
    expect(JSON.stringify(sent)).not.toContain('cache_control');
    expect(JSON.stringify(sent)).not.toContain('The user wants weather.');
    expect(sent.anthropic).toBeUndefined();
    expect(sent.messages.at(-2)).toEqual({ role: 'assistant', content: 'Checking.' });
  });

  it('keeps history thinking blocks (signature included) for the anthropic kind', async () => {
    const res = await claudeCode('claude-sonnet', {
      stream: false,
      messages: [
        { role: 'user', content: 'Weather in Rome?' },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'Use the tool.', signature: 'sig-1' }, { type: 'tool_use', id: 'toolu_7', name: 'get_weather', input: { city: 'Rome' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_7', content: 'rain', is_error: true }] },
      ],
    });
    expect(res.status).toBe(200);
    expect(claude.last().body.messages.slice(1)).toEqual([
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'Use the tool.', signature: 'sig-1' }, { type: 'tool_use', id: 'toolu_7', name: 'get_weather', input: { city: 'Rome' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_7', content: 'rain', is_error: true }] },
    ]);
  });

  it('takes the key from x-api-key too, and answers errors with request-id', async () => {
    const res = await fetch(`${origin}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': 'svc_not_a_key', 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-1', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('request-id')).toBe(res.headers.get('x-svc-request-id'));
    expect(await res.json()).toEqual({
      type: 'error',
      error: { type: 'authentication_error', message: expect.any(String), svc_code: 'invalid_api_key' },
      request_id: res.headers.get('x-svc-request-id'),
    });
  });

  it('refuses an anthropic-version before 2023-06-01 naming the header', async () => {
    const res = await fetch(`${origin}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': secret, 'anthropic-version': '2023-01-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-1', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ type: 'invalid_request_error', svc_code: 'invalid_request', param: 'anthropic-version' });
  });

  it('an operator names the project with X-Svc-Project', async () => {
    const res = await fetch(`${origin}/v1/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${MASTER_KEY}`, 'x-svc-project': projectId, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-1', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    await t.deps.outcomes.flush();
    const record = await t.deps.db.usageRecord.findFirst({ where: { requestId: res.headers.get('request-id')! } });
    expect(record?.projectId).toBe(projectId);
  });
});
