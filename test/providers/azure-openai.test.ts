import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AzureOpenAIProvider } from '../../src/providers/azure-openai.ts';
import { startFakeAzureOpenAI, type FakeAzureOpenAI } from '../helpers/fake-azure-openai.ts';
import { collect, PERSON_FORMAT, providerError, request, specOf, textOf, TOOL_ROUND_TRIP, toolCallsOf, WEATHER_TOOL } from './kinds.fixtures.ts';

const KEY = '0123456789abcdef0123456789abcdef';
let fake: FakeAzureOpenAI;
let provider: AzureOpenAIProvider;

beforeAll(async () => {
  fake = await startFakeAzureOpenAI(KEY, ['prod-gpt4o', 'gpt-4o-mini', 'embed-small']);
  provider = new AzureOpenAIProvider(
    specOf(
      {
        name: 'az',
        kind: 'azure_openai',
        base_url: fake.url,
        api_key_env: 'AZURE_KEY',
        api_version: '2024-10-21',
        region: 'westeurope',
        models: [
          { id: 'gpt-4o', deployment: 'prod-gpt4o', input_per_mtok: 2.5, output_per_mtok: 10 },
          // Without deployment: the deployment is the model id.
          { id: 'gpt-4o-mini', input_per_mtok: 0.15, output_per_mtok: 0.6 },
          { id: 'text-embedding-3-small', deployment: 'embed-small', type: 'embedding', input_per_mtok: 0.02, output_per_mtok: 0 },
        ],
      },
      { AZURE_KEY: KEY },
    ),
  );
});
afterAll(async () => {
  await provider.close();
  await fake.close();
});
beforeEach(() => fake.set({ text: 'Hello from Azure.' }));

const req = (messages: Parameters<typeof request>[0], more: Parameters<typeof request>[1] = {}) => request(messages, { model: 'gpt-4o', ...more });

describe('kind azure_openai', () => {
  it('answers a plain chat at the deployment URL with api-version and the api-key header; the body is OpenAI\'s', async () => {
    const answer = await provider.complete(req([{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], { maxTokens: 20, sampling: { temperature: 1, seed: 4 }, options: { user: 'u' } }));
    expect(answer).toEqual({ content: 'Hello from Azure.', finishReason: 'stop', usage: { promptTokens: 11, completionTokens: 7 } });
    const r = fake.last();
    expect(r.url).toBe('/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-10-21');
    expect(r.headers['api-key']).toBe(KEY);
    expect(r.headers.authorization).toBeUndefined();
    expect(r.body).toEqual({
      // api-version 2024-10-21 predates the developer role (2024-12-01-preview): it goes as system.
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }],
      temperature: 1,
      seed: 4,
      max_tokens: 20,
      user: 'u',
    });
    await provider.complete(req([{ role: 'user', content: 'Hi' }], { model: 'gpt-4o-mini' }));
    expect(fake.last().pathname).toBe('/openai/deployments/gpt-4o-mini/chat/completions');
  });

  it('streams an answer (skipping the prompt_filter_results chunk) with usage', async () => {
    const parts = await collect(await provider.openStream(req([{ role: 'user', content: 'Hi' }])));
    expect(fake.last().body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(textOf(parts)).toBe('Hello from Azure.');
    expect(parts.slice(-2)).toEqual([
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: 11, completionTokens: 7 } },
    ]);
  });

  it('passes tools, tool_choice, tool messages and the rest through, and answers tool calls', async () => {
    fake.set({ toolCalls: [{ id: 'call_az', name: 'get_weather', input: { city: 'Rome' } }] });
    const options = {
      tools: [WEATHER_TOOL],
      tool_choice: 'auto' as const,
      parallel_tool_calls: false,
      n: 1,
      logit_bias: { '50256': -100 },
      logprobs: true,
      top_logprobs: 2,
    };
    const answer = await provider.complete(req(TOOL_ROUND_TRIP, { options }));
    expect(answer).toMatchObject({
      content: '',
      finishReason: 'tool_calls',
      toolCalls: [{ id: 'call_az', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }],
    });
    const asSystem = TOOL_ROUND_TRIP.map((m) => (m.role === 'developer' ? { ...m, role: 'system' } : m));
    expect(fake.last().body).toEqual({ messages: asSystem, ...options });
    expect('unsupported' in provider).toBe(false);
  });

  it('streams a tool call in pieces', async () => {
    fake.set({ toolCalls: [{ id: 'call_az', name: 'get_weather', input: { city: 'Rome' } }] });
    const parts = await collect(await provider.openStream(req([{ role: 'user', content: 'Weather?' }], { options: { tools: [WEATHER_TOOL] } })));
    expect(parts.filter((p) => p.type === 'tool_call').length).toBeGreaterThan(2);
    expect(toolCallsOf(parts)).toEqual([{ index: 0, id: 'call_az', name: 'get_weather', arguments: '{"city":"Rome"}' }]);
    expect(parts.find((p) => p.type === 'finish')).toEqual({ type: 'finish', finishReason: 'tool_calls' });
  });

  it('passes response_format json_schema through', async () => {
    fake.set({ text: '{"name":"Ada"}' });
    const answer = await provider.complete(req([{ role: 'user', content: 'Who?' }], { options: { response_format: PERSON_FORMAT } }));
    expect(answer.content).toBe('{"name":"Ada"}');
    expect(fake.last().body.response_format).toEqual(PERSON_FORMAT);
  });

  it('embeds at the deployment\'s /embeddings, vectors in input order, with usage', async () => {
    const result = await provider.embed!({ model: 'text-embedding-3-small', input: ['a', 'bb'], dimensions: 2, user: 'u', signal: new AbortController().signal });
    expect(result).toEqual({ vectors: [[0.1, 0.2], [0.2, 0.3]], usage: { promptTokens: 4 } });
    expect(fake.last().url).toBe('/openai/deployments/embed-small/embeddings?api-version=2024-10-21');
    expect(fake.last().body).toEqual({ input: ['a', 'bb'], encoding_format: 'float', dimensions: 2, user: 'u' });
  });

  it('classifies errors: 400 rejected, 5xx and an unknown deployment (404) status, the key redacted', async () => {
    fake.set({ status: 400, error: "Invalid value for 'tool_choice'" });
    let err = await providerError(provider.complete(req([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status]).toEqual(['rejected', 400]);
    fake.set({ status: 500, error: `oops api-key ${KEY}` });
    err = await providerError(provider.complete(req([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status]).toEqual(['status', 500]);
    expect(err.message).not.toContain(KEY);
    fake.set({ text: 'hi' });
    err = await providerError(provider.complete(req([{ role: 'user', content: 'x' }], { model: 'no-such-deployment' })));
    expect([err.kind, err.status]).toEqual(['status', 404]);
  });

  it('fails a stream that carries an error chunk', async () => {
    fake.set({ text: 'Hello there, friend.', streamError: 'content filter service down' });
    const err = await providerError(collect(await provider.openStream(req([{ role: 'user', content: 'x' }]))));
    expect(err.kind).toBe('status');
  });
});
