import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { generateObject, generateText, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { expectOneOutcome, writeProvidersFile } from './fixtures.ts';

/**
 * The client libraries real applications use, against a running gateway (CONTRACT §9): the official `openai` SDK,
 * the Vercel AI SDK's default model (Responses API) and LangChain's ChatOpenAI. Each runs on the built-in mock kind and
 * through an `openai`-kind provider (a local OpenAI-wire server answering as the mock does).
 */

let t: TestApp;
let base: string;
let secret: string;
let wire: MockOpenAI;

beforeAll(async () => {
  wire = await startMockOpenAI();
  const file = writeProvidersFile({
    providers: [
      {
        name: 'builtin',
        kind: 'mock',
        region: 'local',
        models: [
          { id: 'mock-1', input_per_mtok: 1, output_per_mtok: 2 },
          { id: 'mock-embed-1', type: 'embedding', input_per_mtok: 0.5, output_per_mtok: 0 },
        ],
      },
      {
        name: 'wire',
        kind: 'openai',
        base_url: wire.url,
        region: 'local',
        timeout_ms: 5000,
        models: [
          { id: 'wire-1', input_per_mtok: 1, output_per_mtok: 2 },
          { id: 'wire-embed-1', type: 'embedding', input_per_mtok: 0.5, output_per_mtok: 0 },
        ],
      },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}/v1`;
  secret = (await seedProject(client(t.app), { plan: 'growth', scopes: ['inference:write', 'models:read', 'usage:read'] })).secret;
}, 240_000);
afterAll(async () => {
  await t.close();
  await wire.close();
});

const weather = {
  type: 'object',
  properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer', minimum: 1 } },
  required: ['city', 'unit', 'days'],
  additionalProperties: false,
} as const;
const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: weather } }];

const cosine = (a: number[], b: number[]) => a.reduce((n, x, i) => n + x * b[i]!, 0);

describe.each([
  { via: 'the built-in mock kind', chat: 'mock-1', embed: 'mock-embed-1', route: 'builtin/mock-1' },
  { via: 'an openai-kind provider', chat: 'wire-1', embed: 'wire-embed-1', route: 'wire/wire-1' },
])('real clients through $via', ({ chat, embed, route }) => {
  const sdk = () => new OpenAI({ baseURL: base, apiKey: secret, maxRetries: 0 });

  describe('the openai SDK', () => {
    it('calls a tool, and answers with text once the tool has answered', async () => {
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
      const first = await sdk().chat.completions.create({ model: chat, messages, tools, tool_choice: 'auto' });
      const choice = first.choices[0]!;
      expect(choice.finish_reason).toBe('tool_calls');
      const call = choice.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(call.function.name).toBe('get_weather');
      expect(JSON.parse(call.function.arguments)).toEqual({ city: 'city', unit: 'celsius', days: 1 });
      await expectOneOutcome(t, (first as any).svc.request_id, { status: 'succeeded', route });

      messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: '18 degrees and sunny' });
      const second = await sdk().chat.completions.create({ model: chat, messages, tools });
      expect(second.choices[0]!.message.content).toBe('18 degrees and sunny');
      expect(second.choices[0]!.finish_reason).toBe('stop');
    });

    it('streams a tool call as indexed deltas', async () => {
      const stream = sdk().chat.completions.stream({
        model: chat,
        messages: [{ role: 'user', content: 'Weather?' }],
        tools,
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
      });
      const final = await stream.finalChatCompletion();
      const call = final.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(call.function.name).toBe('get_weather');
      expect(JSON.parse(call.function.arguments)).toEqual({ city: 'city', unit: 'celsius', days: 1 });
      expect(final.choices[0]!.finish_reason).toBe('tool_calls');
    });

    it('answers JSON valid against a json_schema response_format', async () => {
      const res = await sdk().chat.completions.create({
        model: chat,
        messages: [{ role: 'user', content: 'A forecast, please' }],
        response_format: { type: 'json_schema', json_schema: { name: 'forecast', schema: weather, strict: true } },
      });
      expect(JSON.parse(res.choices[0]!.message.content!)).toEqual({ city: 'city', unit: 'celsius', days: 1 });
    });

    it('responses.create, plain and streamed', async () => {
      const plain = await sdk().responses.create({ model: chat, input: 'Hello responses', instructions: 'Be brief.', store: false });
      expect(plain.status).toBe('completed');
      expect(plain.output_text).toBe('Hello responses');
      expect(plain.usage!.total_tokens).toBeGreaterThan(0);

      const stream = await sdk().responses.create({ model: chat, input: 'Hello streamed responses', stream: true });
      const types: string[] = [];
      let text = '';
      let completed: OpenAI.Responses.Response | null = null;
      for await (const e of stream) {
        types.push(e.type);
        if (e.type === 'response.output_text.delta') text += e.delta;
        if (e.type === 'response.completed') completed = e.response;
      }
      expect(text).toBe('Hello streamed responses');
      expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
      expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
      expect(completed!.output[0]).toMatchObject({ type: 'message', content: [{ type: 'output_text', text: 'Hello streamed responses' }] });
    });

    it('responses with a function tool round-trip through function_call_output, streamed too', async () => {
      const rtools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', parameters: weather, strict: true }];
      const first = await sdk().responses.create({ model: chat, input: 'Weather?', tools: rtools });
      const call = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
      expect(JSON.parse(call.arguments)).toEqual({ city: 'city', unit: 'celsius', days: 1 });
      const second = await sdk().responses.create({
        model: chat,
        tools: rtools,
        input: [{ role: 'user', content: 'Weather?' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'Rainy' }],
      });
      expect(second.output_text).toBe('Rainy');

      const streamed = sdk().responses.stream({ model: chat, input: 'Weather?', tools: rtools });
      const args: string[] = [];
      streamed.on('response.function_call_arguments.delta', (e) => void args.push(e.delta));
      const final = await streamed.finalResponse();
      const streamedCall = final.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
      expect(args.join('')).toBe(streamedCall.arguments);
      expect(JSON.parse(streamedCall.arguments)).toEqual({ city: 'city', unit: 'celsius', days: 1 });
    });

    it('embeddings.create (base64 on the wire, as the SDK asks by default), deterministic and similar texts closer', async () => {
      const res = await sdk().embeddings.create({ model: embed, input: ['the cat sat on the mat', 'a cat sat on a mat', 'quarterly tax report'] });
      expect(res.data).toHaveLength(3);
      const [a, b, c] = res.data.map((d) => d.embedding);
      expect(a).toHaveLength(256);
      expect(Math.hypot(...a!)).toBeCloseTo(1, 5);
      expect(cosine(a!, b!)).toBeGreaterThan(cosine(a!, c!));
      expect(res.usage.prompt_tokens).toBeGreaterThan(0);
      const again = await sdk().embeddings.create({ model: embed, input: 'the cat sat on the mat', dimensions: 64, encoding_format: 'float' });
      expect(again.data[0]!.embedding).toHaveLength(64);
    });
  });

  describe('the Vercel AI SDK (default model: the Responses API)', () => {
    const provider = () => createOpenAI({ baseURL: base, apiKey: secret });

    it('generateText and streamText', async () => {
      const { text } = await generateText({ model: provider()(chat), prompt: 'Hello AI SDK' });
      expect(text).toBe('Hello AI SDK');
      const stream = streamText({ model: provider()(chat), prompt: 'Hello streamed AI SDK' });
      let streamed = '';
      for await (const piece of stream.textStream) streamed += piece;
      expect(streamed).toBe('Hello streamed AI SDK');
      expect((await stream.usage).totalTokens).toBeGreaterThan(0);
    });

    it('generateObject', async () => {
      const { object } = await generateObject({
        model: provider()(chat),
        schema: z.object({ city: z.string(), days: z.number().int().min(2), tags: z.array(z.string()) }),
        prompt: 'A trip',
      });
      expect(object).toEqual({ city: 'city', days: 2, tags: ['tags'] });
    });

    it('generateText with a tool runs it and answers after the tool result', async () => {
      const { text, steps } = await generateText({
        model: provider()(chat),
        prompt: 'Weather in Paris?',
        tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => `Sunny in ${city}` }) },
        stopWhen: stepCountIs(3),
      });
      expect(steps[0]!.toolCalls[0]).toMatchObject({ toolName: 'get_weather', input: { city: 'city' } });
      expect(text).toBe('Sunny in city');
    });
  });

  describe("LangChain's ChatOpenAI", () => {
    const model = (extra: Record<string, unknown> = {}) =>
      new ChatOpenAI({ model: chat, apiKey: secret, configuration: { baseURL: base }, maxRetries: 0, ...extra });

    it('bindTools', async () => {
      const ai = await model()
        .bindTools([{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: weather } }])
        .invoke('Weather in Paris?');
      expect(ai.tool_calls?.[0]).toMatchObject({ name: 'get_weather', args: { city: 'city', unit: 'celsius', days: 1 } });
    });

    it('withStructuredOutput', async () => {
      const out = await model()
        .withStructuredOutput(z.object({ name: z.string(), age: z.number() }), { name: 'person' })
        .invoke('Who?');
      expect(out).toEqual({ name: 'name', age: 1 });
    });

    it('useResponsesApi', async () => {
      const ai = await model({ useResponsesApi: true }).invoke('Hello LangChain responses');
      expect(ai.text).toBe('Hello LangChain responses');
    });
  });
});
