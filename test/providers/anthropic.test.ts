import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AnthropicProvider } from '../../src/providers/anthropic.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../helpers/fake-anthropic.ts';
import { collect, PERSON_FORMAT, providerError, request, specOf, textOf, TOOL_ROUND_TRIP, toolCallsOf, WEATHER_TOOL } from './kinds.fixtures.ts';

const KEY = 'sk-ant-api03-secret-key-0123456789abcdef';
let fake: FakeAnthropic;
let provider: AnthropicProvider;

beforeAll(async () => {
  fake = await startFakeAnthropic(KEY);
  provider = new AnthropicProvider(
    specOf({ name: 'claude', kind: 'anthropic', base_url: fake.url, api_key_env: 'ANTHROPIC_KEY', region: 'us-east-1', models: [{ id: 'm', input_per_mtok: 3, output_per_mtok: 15 }] }, { ANTHROPIC_KEY: KEY }),
  );
});
afterAll(async () => {
  await provider.close();
  await fake.close();
});
beforeEach(() => fake.set({ text: 'Hello from Claude.' }));

describe('kind anthropic: the Messages API', () => {
  it('answers a plain chat, with the key, the version header, the system prompt split out and max_tokens defaulted', async () => {
    const answer = await provider.complete(
      request(
        [
          { role: 'system', content: 'Be brief.' },
          { role: 'developer', content: [{ type: 'text', text: 'Be kind.' }] },
          { role: 'user', content: 'Hi' },
          { role: 'user', content: [{ type: 'text', text: 'there' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] },
        ],
        { sampling: { temperature: 0.5, top_p: 0.9, stop: 'END' }, options: { user: 'u-1' } },
      ),
    );
    expect(answer).toEqual({ content: 'Hello from Claude.', finishReason: 'stop', usage: { promptTokens: 11, completionTokens: 7 } });
    const r = fake.last();
    expect(r.pathname).toBe('/v1/messages');
    expect(r.headers['x-api-key']).toBe(KEY);
    expect(r.headers['anthropic-version']).toBe('2023-06-01');
    expect(r.headers.authorization).toBeUndefined();
    expect(r.body).toEqual({
      model: 'm',
      max_tokens: 4096,
      system: 'Be brief.\n\nBe kind.',
      // Two user messages in a row are one user turn.
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Hi' },
            { type: 'text', text: 'there' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
          ],
        },
      ],
      temperature: 0.5,
      top_p: 0.9,
      stop_sequences: ['END'],
      metadata: { user_id: 'u-1' },
    });
  });

  it('streams an answer: text deltas, the stop reason, the usage from message_start and message_delta', async () => {
    const parts = await collect(await provider.openStream(request([{ role: 'user', content: 'Hi' }], { maxTokens: 50 })));
    expect(textOf(parts)).toBe('Hello from Claude.');
    expect(parts.filter((p) => p.type === 'delta').length).toBeGreaterThan(1);
    expect(parts.slice(-2)).toEqual([
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: 11, completionTokens: 7 } },
    ]);
    expect(fake.last().body).toMatchObject({ stream: true, max_tokens: 50 });
    expect(fake.last().headers.accept).toBe('text/event-stream');
  });

  it('translates tools, tool_choice, tool calls and tool results, and answers with tool calls', async () => {
    fake.set({ toolCalls: [{ id: 'toolu_1', name: 'get_weather', input: { city: 'Rome' } }] });
    const answer = await provider.complete(
      request(TOOL_ROUND_TRIP, { options: { tools: [WEATHER_TOOL], tool_choice: 'required', parallel_tool_calls: false } }),
    );
    expect(answer).toEqual({
      content: '',
      finishReason: 'tool_calls',
      toolCalls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }],
      usage: { promptTokens: 11, completionTokens: 7 },
    });
    const body = fake.last().body;
    expect(body.system).toBe('Be brief.\n\nUse tools.');
    expect(body.tools).toEqual([{ name: 'get_weather', description: 'The weather in a city', input_schema: WEATHER_TOOL.function.parameters }]);
    expect(body.tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true });
    expect(body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris and Oslo?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'call_2', name: 'get_weather', input: { city: 'Oslo' } },
        ],
      },
      // Both results in one user turn.
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: '{"temp":21}' },
          { type: 'tool_result', tool_use_id: 'call_2', content: 'cold' },
        ],
      },
    ]);
  });

  it('maps every tool_choice', async () => {
    const choices = [
      ['auto', { type: 'auto' }],
      ['none', { type: 'none' }],
      [{ type: 'function', function: { name: 'get_weather' } }, { type: 'tool', name: 'get_weather' }],
    ] as const;
    for (const [choice, expected] of choices) {
      await provider.complete(request([{ role: 'user', content: 'x' }], { options: { tools: [WEATHER_TOOL], tool_choice: choice } }));
      expect(fake.last().body.tool_choice).toEqual(expected);
    }
  });

  it('streams a tool call: id and name first, then the input_json_delta pieces, finish tool_calls', async () => {
    fake.set({ text: 'Let me look.', toolCalls: [{ id: 'toolu_1', name: 'get_weather', input: { city: 'Rome' } }, { id: 'toolu_2', name: 'get_weather', input: { city: 'Oslo' } }] });
    const parts = await collect(await provider.openStream(request([{ role: 'user', content: 'Weather?' }], { options: { tools: [WEATHER_TOOL] } })));
    expect(textOf(parts)).toBe('Let me look.');
    const first = parts.find((p) => p.type === 'tool_call');
    expect(first).toEqual({ type: 'tool_call', index: 0, id: 'toolu_1', name: 'get_weather', arguments: '' });
    expect(parts.filter((p) => p.type === 'tool_call' && p.index === 0).length).toBeGreaterThan(2);
    expect(toolCallsOf(parts)).toEqual([
      { index: 0, id: 'toolu_1', name: 'get_weather', arguments: '{"city":"Rome"}' },
      { index: 1, id: 'toolu_2', name: 'get_weather', arguments: '{"city":"Oslo"}' },
    ]);
    expect(parts.find((p) => p.type === 'finish')).toEqual({ type: 'finish', finishReason: 'tool_calls' });
  });

  it('asks for structured output with a forced tool and answers its input as the JSON text', async () => {
    fake.set({ toolCalls: [{ id: 'toolu_9', name: 'person', input: { name: 'Ada' } }] });
    const answer = await provider.complete(request([{ role: 'user', content: 'Who?' }], { options: { response_format: PERSON_FORMAT } }));
    expect(answer).toEqual({ content: '{"name":"Ada"}', finishReason: 'stop', usage: { promptTokens: 11, completionTokens: 7 } });
    expect(fake.last().body.tools).toEqual([
      { name: 'person', description: expect.any(String), input_schema: (PERSON_FORMAT as any).json_schema.schema },
    ]);
    expect(fake.last().body.tool_choice).toEqual({ type: 'tool', name: 'person' });

    fake.set({ toolCalls: [{ id: 'toolu_9', name: 'json_object', input: { a: 1 } }] });
    const streamed = await collect(await provider.openStream(request([{ role: 'user', content: 'Who?' }], { options: { response_format: { type: 'json_object' } } })));
    expect(fake.last().body.tool_choice).toEqual({ type: 'tool', name: 'json_object' });
    expect(fake.last().body.tools[0].input_schema).toEqual({ type: 'object' });
    expect(textOf(streamed)).toBe('{"a":1}');
    expect(streamed.some((p) => p.type === 'tool_call')).toBe(false);
    expect(streamed.find((p) => p.type === 'finish')).toEqual({ type: 'finish', finishReason: 'stop' });
  });

  it('maps stop reasons: max_tokens is length, refusal is content_filter', async () => {
    fake.set({ text: 'cut', stop: 'max_tokens' });
    expect((await provider.complete(request([{ role: 'user', content: 'x' }]))).finishReason).toBe('length');
    fake.set({ text: 'no', stop: 'refusal' });
    expect((await provider.complete(request([{ role: 'user', content: 'x' }]))).finishReason).toBe('content_filter');
  });

  it('names the fields it cannot carry, and refuses them without calling Anthropic', async () => {
    const msg = [{ role: 'user' as const, content: 'x' }];
    const cases: Array<[Parameters<typeof request>[1], string]> = [
      [{ options: { n: 2 } }, 'n'],
      [{ options: { logprobs: true } }, 'logprobs'],
      [{ options: { top_logprobs: 2 } }, 'top_logprobs'],
      [{ options: { logit_bias: { '50256': -100 } } }, 'logit_bias'],
      [{ options: { reasoning_effort: 'low' } }, 'reasoning_effort'],
      [{ sampling: { seed: 7 } }, 'seed'],
      [{ sampling: { presence_penalty: 0.5 } }, 'presence_penalty'],
      [{ options: { response_format: PERSON_FORMAT, tools: [WEATHER_TOOL] } }, 'response_format'],
    ];
    for (const [more, field] of cases) expect(provider.unsupported(request(msg, more))).toBe(field);
    expect(provider.unsupported(request([{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'ftp://x/y.png' } }] }]))).toBe('messages[0].content[1]');
    expect(provider.unsupported(request(msg, { sampling: { presence_penalty: 0 }, options: { n: 1, parallel_tool_calls: true } }))).toBeNull();
    const before = fake.requests.length;
    const err = await providerError(provider.complete(request(msg, { options: { n: 3 } })));
    expect(err.kind).toBe('rejected');
    expect(fake.requests.length).toBe(before);
  });

  it('classifies errors: 400 rejected (not retried), 5xx and 429 status (fallback), a wrong key status, without the key', async () => {
    fake.set({ status: 400, error: 'messages: roles must alternate' });
    let err = await providerError(provider.complete(request([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status, err.retryable]).toEqual(['rejected', 400, false]);
    expect(err.message).toContain('messages: roles must alternate');

    fake.set({ status: 529, error: 'Overloaded' });
    err = await providerError(provider.complete(request([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status, err.retryable]).toEqual(['status', 529, true]);
    fake.set({ status: 429 });
    expect((await providerError(provider.openStream(request([{ role: 'user', content: 'x' }])))).kind).toBe('status');

    fake.set({ status: 500, error: `bad key ${KEY} and x-api-key: sk-ant-other-key-0123456789` });
    err = await providerError(provider.complete(request([{ role: 'user', content: 'x' }])));
    expect(err.message).not.toContain(KEY);
    expect(err.message).not.toContain('sk-ant-other');
    expect(err.message).toContain('[redacted]');

    const wrongKey = new AnthropicProvider(
      specOf({ name: 'c2', kind: 'anthropic', base_url: fake.url, api_key_env: 'K', region: 'us-east-1', models: [{ id: 'm', input_per_mtok: 1, output_per_mtok: 1 }] }, { K: 'wrong' }),
    );
    err = await providerError(wrongKey.complete(request([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status]).toEqual(['status', 401]);
    await wrongKey.close();
  });

  it('fails a stream that carries an error event, without the key', async () => {
    fake.set({ text: 'Hello there, friend.', streamError: `Overloaded (key ${KEY})` });
    const stream = await provider.openStream(request([{ role: 'user', content: 'x' }]));
    const seen: string[] = [];
    const err = await providerError(
      (async () => {
        for await (const p of stream) if (p.type === 'delta') seen.push(p.content);
      })(),
    );
    expect(seen.length).toBe(1);
    expect(err.kind).toBe('status');
    expect(err.message).toContain('Overloaded');
    expect(err.message).not.toContain(KEY);
  });

  it('sends the configured anthropic-version and default_max_tokens', async () => {
    const p = new AnthropicProvider(
      specOf(
        { name: 'c3', kind: 'anthropic', base_url: fake.url, api_key_env: 'K', api_version: '2024-01-01', default_max_tokens: 123, region: 'us-east-1', models: [{ id: 'm', input_per_mtok: 1, output_per_mtok: 1 }] },
        { K: KEY },
      ),
    );
    await p.complete(request([{ role: 'user', content: 'x' }]));
    expect(fake.last().headers['anthropic-version']).toBe('2024-01-01');
    expect(fake.last().body.max_tokens).toBe(123);
    await p.close();
  });
});
