import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GeminiProvider } from '../../src/providers/gemini.ts';
import { startFakeGemini, type FakeGemini } from '../helpers/fake-gemini.ts';
import { collect, PERSON_FORMAT, providerError, request, specOf, textOf, TOOL_ROUND_TRIP, toolCallsOf, WEATHER_TOOL } from './kinds.fixtures.ts';

const KEY = 'AIzaSyFakeKey0123456789abcdefghijklmnopq';
let fake: FakeGemini;
let provider: GeminiProvider;

const entry = (more: Record<string, unknown> = {}) => ({
  name: 'gem',
  kind: 'gemini',
  base_url: fake.url,
  api_key_env: 'GEMINI_KEY',
  region: 'us-central1',
  models: [
    { id: 'gemini-2.5-flash', input_per_mtok: 0.3, output_per_mtok: 2.5 },
    { id: 'text-embedding-004', type: 'embedding', input_per_mtok: 0.1, output_per_mtok: 0 },
  ],
  ...more,
});

beforeAll(async () => {
  fake = await startFakeGemini(KEY);
  provider = new GeminiProvider(specOf(entry(), { GEMINI_KEY: KEY }));
});
afterAll(async () => {
  await provider.close();
  await fake.close();
});
beforeEach(() => fake.set({ text: 'Hello from Gemini.' }));

const req = (messages: Parameters<typeof request>[0], more: Parameters<typeof request>[1] = {}) => request(messages, { model: 'gemini-2.5-flash', ...more });

describe('kind gemini: generateContent and streamGenerateContent', () => {
  it('answers a plain chat: contents with roles user/model, systemInstruction, generationConfig, the key in x-goog-api-key', async () => {
    const answer = await provider.complete(
      req(
        [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello!' },
          { role: 'user', content: [{ type: 'text', text: 'A picture:' }, { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/4AAQ' } }] },
        ],
        { maxTokens: 64, sampling: { temperature: 0.2, top_p: 0.8, stop: ['X', 'Y'], seed: 3, presence_penalty: 0.1, frequency_penalty: 0.2 } },
      ),
    );
    expect(answer).toEqual({ content: 'Hello from Gemini.', finishReason: 'stop', usage: { promptTokens: 11, completionTokens: 7 } });
    const r = fake.last();
    expect(r.pathname).toBe('/v1beta/models/gemini-2.5-flash:generateContent');
    expect(r.headers['x-goog-api-key']).toBe(KEY);
    expect(r.query.get('key')).toBeNull();
    expect(r.body).toEqual({
      contents: [
        { role: 'user', parts: [{ text: 'Hi' }] },
        { role: 'model', parts: [{ text: 'Hello!' }] },
        { role: 'user', parts: [{ text: 'A picture:' }, { inlineData: { mimeType: 'image/jpeg', data: '/9j/4AAQ' } }] },
      ],
      systemInstruction: { parts: [{ text: 'Be brief.' }] },
      generationConfig: { temperature: 0.2, topP: 0.8, stopSequences: ['X', 'Y'], seed: 3, presencePenalty: 0.1, frequencyPenalty: 0.2, maxOutputTokens: 64 },
    });
  });

  it('puts the key in the query with api_key_in: query', async () => {
    const q = new GeminiProvider(specOf(entry({ name: 'gq', api_key_in: 'query' }), { GEMINI_KEY: KEY }));
    await q.complete(req([{ role: 'user', content: 'Hi' }]));
    expect(fake.last().query.get('key')).toBe(KEY);
    expect(fake.last().headers['x-goog-api-key']).toBeUndefined();
    await q.close();
  });

  it('streams an answer over alt=sse: deltas, finish, the last usageMetadata', async () => {
    const parts = await collect(await provider.openStream(req([{ role: 'user', content: 'Hi' }])));
    expect(fake.last().url).toMatch(/^\/v1beta\/models\/gemini-2\.5-flash:streamGenerateContent\?alt=sse$/);
    expect(textOf(parts)).toBe('Hello from Gemini.');
    expect(parts.filter((p) => p.type === 'delta').length).toBeGreaterThan(1);
    expect(parts.slice(-2)).toEqual([
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: 11, completionTokens: 7 } },
    ]);
  });

  it('translates tools (parametersJsonSchema), tool_choice, functionCall and functionResponse parts', async () => {
    fake.set({ toolCalls: [{ id: '', name: 'get_weather', input: { city: 'Rome' } }] });
    const answer = await provider.complete(req(TOOL_ROUND_TRIP, { options: { tools: [WEATHER_TOOL], tool_choice: { type: 'function', function: { name: 'get_weather' } } } }));
    expect(answer).toEqual({
      content: '',
      finishReason: 'tool_calls',
      // The first call of a step carries Gemini's thought signature in its id (translate.ts withThoughtSignature).
      toolCalls: [{ id: expect.stringMatching(/^call_[0-9a-f]{24}__ts_[A-Za-z0-9_-]+$/), type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }],
      usage: { promptTokens: 11, completionTokens: 7 },
    });
    const body = fake.last().body;
    expect(body.systemInstruction).toEqual({ parts: [{ text: 'Be brief.\n\nUse tools.' }] });
    expect(body.tools).toEqual([
      { functionDeclarations: [{ name: 'get_weather', description: 'The weather in a city', parametersJsonSchema: WEATHER_TOOL.function.parameters }] },
    ]);
    expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } });
    expect(body.contents).toEqual([
      { role: 'user', parts: [{ text: 'Weather in Paris and Oslo?' }] },
      {
        role: 'model',
        parts: [
          // Calls Gemini did not make (no signature in their ids): the first gets Gemini's documented dummy signature.
          { functionCall: { id: 'call_1', name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'skip_thought_signature_validator' },
          { functionCall: { id: 'call_2', name: 'get_weather', args: { city: 'Oslo' } } },
        ],
      },
      {
        role: 'user',
        parts: [
          // A JSON object answer as is, anything else wrapped; the function's name from the call it answers.
          { functionResponse: { id: 'call_1', name: 'get_weather', response: { temp: 21 } } },
          { functionResponse: { id: 'call_2', name: 'get_weather', response: { content: 'cold' } } },
        ],
      },
    ]);
    for (const [choice, mode] of [['auto', 'AUTO'], ['required', 'ANY'], ['none', 'NONE']] as const) {
      await provider.complete(req([{ role: 'user', content: 'x' }], { options: { tools: [WEATHER_TOOL], tool_choice: choice } }));
      expect(fake.last().body.toolConfig).toEqual({ functionCallingConfig: { mode } });
    }
  });

  it('streams a tool call: one whole tool_call part per functionCall, finish tool_calls', async () => {
    fake.set({ text: 'Looking.', toolCalls: [{ id: '', name: 'get_weather', input: { city: 'Rome' } }, { id: '', name: 'get_weather', input: { city: 'Oslo' } }] });
    const parts = await collect(await provider.openStream(req([{ role: 'user', content: 'Weather?' }], { options: { tools: [WEATHER_TOOL] } })));
    expect(textOf(parts)).toBe('Looking.');
    expect(toolCallsOf(parts)).toEqual([
      { index: 0, id: expect.stringMatching(/^call_/), name: 'get_weather', arguments: '{"city":"Rome"}' },
      { index: 1, id: expect.stringMatching(/^call_/), name: 'get_weather', arguments: '{"city":"Oslo"}' },
    ]);
    expect(parts.find((p) => p.type === 'finish')).toEqual({ type: 'finish', finishReason: 'tool_calls' });
  });

  it('asks for structured output with responseMimeType and responseJsonSchema', async () => {
    fake.set({ text: '{"name":"Ada"}' });
    const answer = await provider.complete(req([{ role: 'user', content: 'Who?' }], { options: { response_format: PERSON_FORMAT } }));
    expect(answer.content).toBe('{"name":"Ada"}');
    expect(fake.last().body.generationConfig).toEqual({ responseMimeType: 'application/json', responseJsonSchema: (PERSON_FORMAT as any).json_schema.schema });
    await provider.complete(req([{ role: 'user', content: 'Who?' }], { options: { response_format: { type: 'json_object' } } }));
    expect(fake.last().body.generationConfig).toEqual({ responseMimeType: 'application/json' });
  });

  it('carries n as candidateCount and answers every candidate as a choice', async () => {
    fake.set({ text: 'one' });
    const answer = await provider.complete(req([{ role: 'user', content: 'x' }], { options: { n: 2 } }));
    expect(fake.last().body.generationConfig).toEqual({ candidateCount: 2 });
    expect(answer.content).toBe('one');
    expect(answer.choices).toEqual([
      { index: 0, content: 'one', finishReason: 'stop' },
      { index: 1, content: 'candidate 1', finishReason: 'stop' },
    ]);
  });

  it('maps finish reasons: MAX_TOKENS is length, SAFETY is content_filter', async () => {
    fake.set({ text: 'cut', stop: 'MAX_TOKENS' });
    expect((await provider.complete(req([{ role: 'user', content: 'x' }]))).finishReason).toBe('length');
    fake.set({ text: '', stop: 'SAFETY' });
    expect((await provider.complete(req([{ role: 'user', content: 'x' }]))).finishReason).toBe('content_filter');
  });

  it('embeds with batchEmbedContents, in input order, with outputDimensionality', async () => {
    const result = await provider.embed!({ model: 'text-embedding-004', input: ['a', 'bbb'], dimensions: 2, signal: new AbortController().signal });
    expect(result).toEqual({ vectors: [[0.01, 0.02], [0.03, 0.04]], usage: null });
    const r = fake.last();
    expect(r.pathname).toBe('/v1beta/models/text-embedding-004:batchEmbedContents');
    expect(r.body).toEqual({
      requests: [
        { model: 'models/text-embedding-004', content: { parts: [{ text: 'a' }] }, outputDimensionality: 2 },
        { model: 'models/text-embedding-004', content: { parts: [{ text: 'bbb' }] }, outputDimensionality: 2 },
      ],
    });
  });

  it('names the fields it cannot carry', () => {
    const msg = [{ role: 'user' as const, content: 'x' }];
    expect(provider.unsupported(req(msg, { options: { logprobs: true } }))).toBe('logprobs');
    expect(provider.unsupported(req(msg, { options: { logit_bias: { '1': 1 } } }))).toBe('logit_bias');
    // reasoning_effort is carried, as thinkingConfig (test/protocols/provider-fidelity.test.ts).
    expect(provider.unsupported(req(msg, { options: { reasoning_effort: 'high' } }))).toBeNull();
    expect(provider.unsupported(req(msg, { options: { parallel_tool_calls: false } }))).toBe('parallel_tool_calls');
    // Gemini takes inline image data only.
    expect(provider.unsupported(req([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x.test/a.png' } }] }]))).toBe('messages[0].content[0]');
    expect(provider.unsupported(req([{ role: 'tool', tool_call_id: 'nope', content: 'x' }]))).toBe('messages[0].tool_call_id');
    expect(provider.unsupported(req(msg, { sampling: { seed: 1 }, options: { n: 2, response_format: PERSON_FORMAT, tools: [WEATHER_TOOL] } }))).toBeNull();
  });

  it('classifies errors: 400 rejected, a bad key (400 API_KEY_INVALID) and 5xx status, the key redacted', async () => {
    fake.set({ status: 400, error: 'Invalid JSON payload received.' });
    let err = await providerError(provider.complete(req([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status]).toEqual(['rejected', 400]);
    expect(err.message).toContain('Invalid JSON payload');

    fake.set({ status: 503, error: `The model is overloaded (${KEY})` });
    err = await providerError(provider.complete(req([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status]).toEqual(['status', 503]);
    expect(err.message).not.toContain(KEY);

    const bad = new GeminiProvider(specOf(entry({ name: 'gb' }), { GEMINI_KEY: 'AIzaWrongKey0123456789abcdefghijklmnopqrs' }));
    err = await providerError(bad.complete(req([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status]).toEqual(['status', 400]);
    await bad.close();
  });

  it('fails a stream that carries an error', async () => {
    fake.set({ text: 'Hello there, friend.', streamError: 'internal' });
    const stream = await provider.openStream(req([{ role: 'user', content: 'x' }]));
    const err = await providerError(collect(stream));
    expect(err.kind).toBe('status');
  });
});
