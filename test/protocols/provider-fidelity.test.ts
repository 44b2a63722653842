import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI, ThinkingLevel, type Content } from '@google/genai';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../helpers/fake-anthropic.ts';
import { startFakeAzureOpenAI, type FakeAzureOpenAI } from '../helpers/fake-azure-openai.ts';
import { startFakeBedrock, type FakeBedrock } from '../helpers/fake-bedrock.ts';
import { fakeThoughtSignature, startFakeGemini, type FakeGemini } from '../helpers/fake-gemini.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { expectOneOutcome, writeProvidersFile } from '../inference/fixtures.ts';

/**
 * Provider fidelity, as the providers' documents say their APIs behave, through the official clients against a running
 * gateway and the local wire servers (which refuse what the real APIs refuse):
 * - Gemini 3's thought signatures round-trip (in the tool call id on the OpenAI and Anthropic surfaces, on the part on
 *   Gemini's), thoughtsTokenCount is billed as output, thought parts stay out of the answer, reasoning_effort becomes
 *   thinkingConfig and top_k / topK become topK;
 * - Claude 4.5-generation models (anthropic and bedrock kinds) refuse temperature with top_p: a 400 naming the field;
 * - Azure api-versions before 2024-12-01-preview get `developer` as `system`;
 * - prompt-cache reads and writes are billed at the providers file's cache prices and shown in each protocol's usage.
 */

const G_KEY = 'AIzaGatewayKey0123456789abcdefghijklmnop';
const A_KEY = 'sk-ant-gateway-key-0123456789';
const AZ_KEY = '0123456789abcdef0123456789abcdef';
const AWS = { accessKeyId: 'AKIAGATEWAYTEST00001', secretAccessKey: 'gateway-secret' };
const CLAUDE = 'claude-sonnet-4-5';
const BR_CLAUDE = 'anthropic.claude-sonnet-4-5-20250929-v1:0';
/** Claude's prices (USD per million tokens = µ$ per token), with the cache prices. */
const CLAUDE_PRICE = { input_per_mtok: 3, output_per_mtok: 15, cache_read_per_mtok: 0.3, cache_write_per_mtok: 3.75 };

let t: TestApp;
let origin: string;
let secret: string;
let wire: MockOpenAI;
let claude: FakeAnthropic;
let gem: FakeGemini;
let br: FakeBedrock;
let az: FakeAzureOpenAI;

beforeAll(async () => {
  [wire, claude, gem, br, az] = await Promise.all([
    startMockOpenAI(),
    startFakeAnthropic(A_KEY),
    startFakeGemini(G_KEY),
    startFakeBedrock(AWS, 'eu-central-1'),
    startFakeAzureOpenAI(AZ_KEY, ['dep-old', 'dep-new']),
  ]);
  const gemPrice = { input_per_mtok: 1, output_per_mtok: 2, cache_read_per_mtok: 0.25 };
  const file = writeProvidersFile({
    providers: [
      { name: 'wire', kind: 'openai', base_url: wire.url, region: 'local', timeout_ms: 5000, models: [{ id: 'wire-1', input_per_mtok: 1, output_per_mtok: 2, cache_read_per_mtok: 0.5 }] },
      { name: 'claude', kind: 'anthropic', base_url: claude.url, api_key_env: 'A_KEY', region: 'local', models: [{ id: CLAUDE, ...CLAUDE_PRICE }] },
      {
        name: 'gem',
        kind: 'gemini',
        base_url: gem.url,
        api_key_env: 'G_KEY',
        region: 'local',
        models: [{ id: 'gemini-3-pro-preview', ...gemPrice }, { id: 'gemini-2.5-flash', ...gemPrice }],
      },
      {
        name: 'br',
        kind: 'bedrock',
        base_url: br.url,
        region: 'local',
        aws_region: 'eu-central-1',
        aws_access_key_id_env: 'AWS_ID',
        aws_secret_access_key_env: 'AWS_SECRET',
        models: [{ id: BR_CLAUDE, ...CLAUDE_PRICE }],
      },
      { name: 'az-old', kind: 'azure_openai', base_url: az.url, api_key_env: 'AZ_KEY', api_version: '2024-10-21', region: 'local', models: [{ id: 'az-old', deployment: 'dep-old', input_per_mtok: 1, output_per_mtok: 1 }] },
      { name: 'az-new', kind: 'azure_openai', base_url: az.url, api_key_env: 'AZ_KEY', api_version: '2024-12-01-preview', region: 'local', models: [{ id: 'az-new', deployment: 'dep-new', input_per_mtok: 1, output_per_mtok: 1 }] },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1000', A_KEY, G_KEY, AZ_KEY, AWS_ID: AWS.accessKeyId, AWS_SECRET: AWS.secretAccessKey } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  ({ secret } = await seedProject(client(t.app), { plan: 'growth', scopes: ['inference:write'] }));
}, 240_000);
afterAll(async () => {
  await t?.close();
  await Promise.all([wire?.close(), claude?.close(), gem?.close(), br?.close(), az?.close()]);
});
beforeEach(() => {
  wire.reset();
  claude.set({ text: 'Hello from Claude.' });
  gem.set({ text: 'Hello from Gemini.' });
  br.set({ text: 'Hello from Bedrock.' });
  az.set({ text: 'Hello from Azure.' });
});

const openai = () => new OpenAI({ baseURL: `${origin}/v1`, apiKey: secret, maxRetries: 0 });
const anthropic = () => new Anthropic({ baseURL: origin, apiKey: secret, maxRetries: 0 });
const genai = () => new GoogleGenAI({ apiKey: secret, httpOptions: { baseUrl: origin } });

const WEATHER = { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
const CALLS = [
  { id: 'ignored', name: 'get_weather', input: { city: 'Rome' } },
  { id: 'ignored', name: 'get_weather', input: { city: 'Oslo' } },
];
const SIG = fakeThoughtSignature('get_weather');

/**
 * A Messages request with sampling fields: the installed @anthropic-ai/sdk no longer types temperature, top_p and top_k
 * (newer models take none), but sends what it is given, as older SDKs and Claude Code send them.
 */
const sampled = (body: Anthropic.MessageCreateParamsNonStreaming, sampling: { temperature?: number; top_p?: number; top_k?: number }) =>
  ({ ...body, ...sampling }) as Anthropic.MessageCreateParamsNonStreaming;

async function rejection(call: Promise<unknown>): Promise<any> {
  const err = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeTruthy();
  return err;
}

describe("Gemini 3's thought signatures", () => {
  it('@google/genai: the functionCall part comes back with its thoughtSignature, and the history that carries it passes', async () => {
    gem.set({ toolCalls: CALLS });
    const first = await genai().models.generateContent({
      model: 'gemini-3-pro-preview',
      contents: 'Weather in Rome and Oslo?',
      config: { tools: [{ functionDeclarations: [{ name: WEATHER.name, description: WEATHER.description, parametersJsonSchema: WEATHER.parameters }] }] },
    });
    const model = first.candidates![0]!.content!;
    // Gemini signs the first call of a step; the part says so, the id stays the provider's (or the gateway's) own.
    expect(model.parts![0]!.thoughtSignature).toBe(SIG);
    expect(model.parts![1]!.thoughtSignature).toBeUndefined();
    const [a, b] = first.functionCalls!;
    expect(a!.id).toMatch(/^call_[0-9a-f]{24}$/);
    expect(b!.args).toEqual({ city: 'Oslo' });

    gem.set({ text: 'Sunny in Rome, snow in Oslo.' });
    const history: Content[] = [
      { role: 'user', parts: [{ text: 'Weather in Rome and Oslo?' }] },
      model,
      {
        role: 'user',
        parts: [
          { functionResponse: { id: a!.id, name: 'get_weather', response: { sky: 'sunny' } } },
          { functionResponse: { id: b!.id, name: 'get_weather', response: { sky: 'snow' } } },
        ],
      },
    ];
    const second = await genai().models.generateContent({ model: 'gemini-3-pro-preview', contents: history });
    expect(second.text).toBe('Sunny in Rome, snow in Oslo.');
    const sent = gem.last().body.contents;
    expect(sent[1].parts[0]).toEqual({ functionCall: { id: a!.id, name: 'get_weather', args: { city: 'Rome' } }, thoughtSignature: SIG });
    expect(sent[1].parts[1]).toEqual({ functionCall: { id: b!.id, name: 'get_weather', args: { city: 'Oslo' } } });
    expect(sent[2].parts.map((p: any) => p.functionResponse.id)).toEqual([a!.id, b!.id]);
  });

  it('the local Gemini 3 server refuses a function-call history without its signature, as the API does (400 INVALID_ARGUMENT)', async () => {
    const post = (part: Record<string, unknown>) =>
      fetch(`${gem.url}/models/gemini-3-pro-preview:generateContent`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': G_KEY },
        body: JSON.stringify({
          contents: [
            { role: 'user', parts: [{ text: 'Weather in Rome?' }] },
            { role: 'model', parts: [part] },
            { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { sky: 'sunny' } } }] },
          ],
        }),
      });
    const call = { functionCall: { name: 'get_weather', args: { city: 'Rome' } } };
    const refused = await post(call);
    expect(refused.status).toBe(400);
    const body = (await refused.json()) as any;
    expect(body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    expect(body.error.message).toContain('thought_signature');
    expect((await post({ ...call, thoughtSignature: 'forged' })).status).toBe(400);
    // What the gateway sends for a call Gemini did not make: the documented dummy.
    expect((await post({ ...call, thoughtSignature: 'skip_thought_signature_validator' })).status).toBe(200);
  });

  it('openai SDK: the signature rides in the tool call id, comes back on the functionCall part, and stays out of the ids Gemini sees', async () => {
    gem.set({ toolCalls: CALLS.slice(0, 1) });
    const tools = [{ type: 'function' as const, function: WEATHER }];
    const first = await openai().chat.completions.create({ model: 'gemini-3-pro-preview', messages: [{ role: 'user', content: 'Weather in Rome?' }], tools });
    const message = first.choices[0]!.message;
    const call = message.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(call.id).toMatch(/^call_[0-9a-f]{24}__ts_[A-Za-z0-9_-]+$/);
    const baseId = call.id.slice(0, call.id.indexOf('__ts_'));

    gem.set({ text: 'Sunny.' });
    const second = await openai().chat.completions.create({
      model: 'gemini-3-pro-preview',
      messages: [{ role: 'user', content: 'Weather in Rome?' }, message, { role: 'tool', tool_call_id: call.id, content: '{"sky":"sunny"}' }],
      tools,
    });
    expect(second.choices[0]!.message.content).toBe('Sunny.');
    const sent = gem.last().body.contents;
    expect(sent[1].parts[0]).toEqual({ functionCall: { id: baseId, name: 'get_weather', args: { city: 'Rome' } }, thoughtSignature: SIG });
    expect(sent[2].parts[0].functionResponse).toEqual({ id: baseId, name: 'get_weather', response: { sky: 'sunny' } });
  });

  it('openai SDK, streamed: the tool call id carries the signature too', async () => {
    gem.set({ toolCalls: CALLS.slice(0, 1) });
    const stream = await openai().chat.completions.create({
      model: 'gemini-3-pro-preview',
      messages: [{ role: 'user', content: 'Weather in Rome?' }],
      tools: [{ type: 'function', function: WEATHER }],
      stream: true,
    });
    const ids: string[] = [];
    for await (const chunk of stream) for (const c of chunk.choices[0]?.delta.tool_calls ?? []) if (c.id) ids.push(c.id);
    expect(ids).toHaveLength(1);
    expect(ids[0]).toContain(`__ts_${SIG.replace(/=+$/, '')}`);
  });

  it('@anthropic-ai/sdk: the tool_use id carries the signature and the tool_result turn passes Gemini 3', async () => {
    gem.set({ toolCalls: CALLS.slice(0, 1) });
    const tool = { name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters as Anthropic.Tool.InputSchema };
    const first = await anthropic().messages.create({ model: 'gemini-3-pro-preview', max_tokens: 100, messages: [{ role: 'user', content: 'Weather in Rome?' }], tools: [tool] });
    const use = first.content.find((b) => b.type === 'tool_use')!;
    expect(use.id).toMatch(/^[A-Za-z0-9_-]+$/);
    gem.set({ text: 'Sunny.' });
    const second = await anthropic().messages.create({
      model: 'gemini-3-pro-preview',
      max_tokens: 100,
      tools: [tool],
      messages: [
        { role: 'user', content: 'Weather in Rome?' },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] },
      ],
    });
    expect(second.content).toEqual([{ type: 'text', text: 'Sunny.' }]);
    expect(gem.last().body.contents[1].parts[0].thoughtSignature).toBe(SIG);
  });

  it('a tool call Gemini did not make goes to Gemini 3 with the documented dummy signature', async () => {
    const res = await openai().chat.completions.create({
      model: 'gemini-3-pro-preview',
      messages: [
        { role: 'user', content: 'Weather in Rome?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_from_elsewhere', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }] },
        { role: 'tool', tool_call_id: 'call_from_elsewhere', content: 'sunny' },
      ],
      tools: [{ type: 'function', function: WEATHER }],
    });
    expect(res.choices[0]!.message.content).toBe('Hello from Gemini.');
    expect(gem.last().body.contents[1].parts[0]).toMatchObject({ functionCall: { id: 'call_from_elsewhere' }, thoughtSignature: 'skip_thought_signature_validator' });
  });

  it('other kinds get the id without the signature (OpenAI caps ids at 40 characters, Bedrock at 64)', async () => {
    const id = `call_abc__ts_${SIG.replace(/=+$/, '')}`;
    await openai().chat.completions.create({
      model: 'wire-1',
      messages: [
        { role: 'user', content: 'Weather in Rome?' },
        { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }] },
        { role: 'tool', tool_call_id: id, content: 'sunny' },
      ],
      tools: [{ type: 'function', function: WEATHER }],
    });
    const sent = wire.requests.at(-1)!.body.messages;
    expect(sent[1].tool_calls[0].id).toBe('call_abc');
    expect(sent[2].tool_call_id).toBe('call_abc');
  });
});

describe("Gemini's thinking", () => {
  it('thoughtsTokenCount is billed as output, the cached prompt at the cache price; thought parts are not the answer', async () => {
    gem.set({ thinking: 'Six times seven…', text: '42', usage: { input: 10, output: 5, thoughts: 20, cacheRead: 4 } });
    const res = await genai().models.generateContent({ model: 'gemini-2.5-flash', contents: 'Six times seven?' });
    expect(res.text).toBe('42');
    expect(res.usageMetadata).toEqual({ promptTokenCount: 10, candidatesTokenCount: 5, thoughtsTokenCount: 20, cachedContentTokenCount: 4, totalTokenCount: 35 });
    // 6 prompt tokens at $1, 4 cached at $0.25, 25 output tokens (5 + 20 thinking) at $2 per million: 57 µ$.
    const requestId = res.sdkHttpResponse!.headers!['x-svc-request-id']!;
    await expectOneOutcome(t, requestId, { status: 'succeeded', promptTokens: 10, completionTokens: 25, costMicros: 57n });

    const chat = await openai().chat.completions.create({ model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'Six times seven?' }] });
    expect(chat.choices[0]!.message.content).toBe('42');
    expect(chat.usage).toEqual({
      prompt_tokens: 10,
      completion_tokens: 25,
      total_tokens: 35,
      prompt_tokens_details: { cached_tokens: 4 },
      completion_tokens_details: { reasoning_tokens: 20 },
    });
  });

  it('streamed: the thought part is skipped and the last chunk reports thoughtsTokenCount', async () => {
    gem.set({ thinking: 'Six times seven…', text: 'It is 42.', usage: { input: 10, output: 5, thoughts: 20 } });
    const chunks = [];
    for await (const c of await genai().models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'Six times seven?' })) chunks.push(c);
    expect(chunks.map((c) => c.text ?? '').join('')).toBe('It is 42.');
    expect(chunks.at(-1)!.usageMetadata).toMatchObject({ candidatesTokenCount: 5, thoughtsTokenCount: 20, totalTokenCount: 35 });
  });

  it('reasoning_effort becomes thinkingConfig: a thinkingLevel for Gemini 3, a thinkingBudget before it', async () => {
    await openai().chat.completions.create({ model: 'gemini-3-pro-preview', messages: [{ role: 'user', content: 'Hi' }], reasoning_effort: 'low' });
    expect(gem.last().body.generationConfig.thinkingConfig).toEqual({ thinkingLevel: 'low' });
    await openai().chat.completions.create({ model: 'gemini-2.5-flash', messages: [{ role: 'user', content: 'Hi' }], reasoning_effort: 'high' });
    expect(gem.last().body.generationConfig.thinkingConfig).toEqual({ thinkingBudget: 24576 });
    await genai().models.generateContent({ model: 'gemini-3-pro-preview', contents: 'Hi', config: { thinkingConfig: { thinkingLevel: ThinkingLevel.HIGH } } });
    expect(gem.last().body.generationConfig.thinkingConfig).toEqual({ thinkingLevel: 'high' });
  });

  it('top_k (Anthropic) and topK (Gemini) reach Gemini as topK; a kind that cannot carry it refuses naming the field', async () => {
    await anthropic().messages.create(sampled({ model: 'gemini-2.5-flash', max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] }, { top_k: 7 }));
    expect(gem.last().body.generationConfig).toMatchObject({ topK: 7, maxOutputTokens: 50 });
    await genai().models.generateContent({ model: 'gemini-2.5-flash', contents: 'Hi', config: { topK: 3 } });
    expect(gem.last().body.generationConfig.topK).toBe(3);
    await genai().models.generateContent({ model: CLAUDE, contents: 'Hi', config: { topK: 3 } });
    expect(claude.last().body.top_k).toBe(3);

    const err = await rejection(genai().models.generateContent({ model: 'wire-1', contents: 'Hi', config: { topK: 3 } }));
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    const body = JSON.parse((err as ApiError).message.slice((err as ApiError).message.indexOf('{')));
    expect(body.error.details.find((d: any) => d['@type'] === 'type.googleapis.com/google.rpc.BadRequest').fieldViolations[0].field).toBe('generationConfig.topK');
  });
});

describe('Claude 4.5: temperature together with top_p', () => {
  it('@anthropic-ai/sdk → anthropic kind: only what the caller sent goes out; both are refused as the API refuses them, naming the field', async () => {
    await anthropic().messages.create(sampled({ model: CLAUDE, max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] }, { temperature: 0.2 }));
    expect(claude.last().body).not.toHaveProperty('top_p');
    expect(claude.last().body.temperature).toBe(0.2);
    await anthropic().messages.create(sampled({ model: CLAUDE, max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] }, { top_p: 0.9 }));
    expect(claude.last().body).not.toHaveProperty('temperature');

    const err = await rejection(anthropic().messages.create(sampled({ model: CLAUDE, max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] }, { temperature: 0.2, top_p: 0.9 })));
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    const e = err as InstanceType<typeof Anthropic.BadRequestError>;
    expect(e.status).toBe(400);
    expect((e.error as any).error).toMatchObject({ type: 'invalid_request_error', svc_code: 'invalid_request', param: 'temperature' });
    expect((e.error as any).error.message).toContain('cannot both be specified');
    await expectOneOutcome(t, e.requestID!, { status: 'failed', errorCode: 'invalid_request', route: `claude/${CLAUDE}` });
  });

  it('openai SDK → bedrock kind: the same refusal from Converse is a 400 naming temperature; one of them passes', async () => {
    await openai().chat.completions.create({ model: BR_CLAUDE, messages: [{ role: 'user', content: 'Hi' }], top_p: 0.5 });
    expect(br.last().body.inferenceConfig).toEqual({ topP: 0.5 });
    const err = await rejection(openai().chat.completions.create({ model: BR_CLAUDE, messages: [{ role: 'user', content: 'Hi' }], temperature: 1, top_p: 0.5 }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    const e = err as InstanceType<typeof OpenAI.BadRequestError>;
    expect(e.status).toBe(400);
    expect(e.code).toBe('invalid_request');
    expect(e.param).toBe('temperature');
  });
});

describe('Azure api-versions before the developer role', () => {
  it('sends developer as system before 2024-12-01-preview, and as developer from it on', async () => {
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: 'developer', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ];
    const old = await openai().chat.completions.create({ model: 'az-old', messages });
    expect(old.choices[0]!.message.content).toBe('Hello from Azure.');
    expect(az.last().url).toBe('/openai/deployments/dep-old/chat/completions?api-version=2024-10-21');
    expect(az.last().body.messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    await openai().chat.completions.create({ model: 'az-new', messages });
    expect(az.last().body.messages[0]).toEqual({ role: 'developer', content: 'Be brief.' });
  });

  it('the local Azure server refuses developer on an old api-version, as Azure does', async () => {
    const res = await fetch(`${az.url}/openai/deployments/dep-old/chat/completions?api-version=2024-10-21`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'api-key': AZ_KEY },
      body: JSON.stringify({ messages: [{ role: 'developer', content: 'Be brief.' }] }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error).toMatchObject({ code: 'invalid_value', param: 'messages[0].role' });
  });
});

describe('prompt-cache usage at the cache prices', () => {
  // 100 uncached prompt tokens at $3, 1,000 cache reads at $0.30, 200 cache writes at $3.75, 10 output tokens at $15
  // per million: 300 + 300 + 750 + 150 = 1,500 µ$.
  const CACHED = { text: 'Cached answer.', usage: { input: 100, output: 10, cacheRead: 1000, cacheWrite: 200 } };

  it('@anthropic-ai/sdk → anthropic kind: Anthropic\'s usage fields, the usage record and the cost', async () => {
    claude.set(CACHED);
    const msg = await anthropic().messages.create({ model: CLAUDE, max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] });
    expect(msg.usage).toMatchObject({ input_tokens: 100, cache_read_input_tokens: 1000, cache_creation_input_tokens: 200, output_tokens: 10 });
    expect((msg as any).svc.cost_usd).toBe(0.0015);
    await expectOneOutcome(t, (msg as any).svc.request_id, { status: 'succeeded', promptTokens: 1300, completionTokens: 10, costMicros: 1500n });
  });

  it('@anthropic-ai/sdk streamed: finalMessage() has the cache counts, and the cost is the same', async () => {
    claude.set(CACHED);
    const stream = anthropic().messages.stream({ model: CLAUDE, max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] });
    const msg = await stream.finalMessage();
    expect(msg.usage).toMatchObject({ input_tokens: 100, cache_read_input_tokens: 1000, cache_creation_input_tokens: 200, output_tokens: 10 });
    const { response } = await stream.withResponse();
    await expectOneOutcome(t, response.headers.get('x-svc-request-id')!, { status: 'succeeded', promptTokens: 1300, completionTokens: 10, costMicros: 1500n });
  });

  it('openai SDK → bedrock kind: cacheReadInputTokens and cacheWriteInputTokens billed, prompt_tokens_details shown', async () => {
    br.set(CACHED);
    const res = await openai()
      .chat.completions.create({ model: BR_CLAUDE, messages: [{ role: 'user', content: 'Hi' }] })
      .withResponse();
    expect(res.data.usage).toEqual({ prompt_tokens: 1300, completion_tokens: 10, total_tokens: 1310, prompt_tokens_details: { cached_tokens: 1000 } });
    await expectOneOutcome(t, res.response.headers.get('x-svc-request-id')!, { status: 'succeeded', promptTokens: 1300, costMicros: 1500n });
  });

  it("an openai-kind provider's cached_tokens: billed at the cache price, and Anthropic's fields on /v1/messages", async () => {
    wire.set({ content: 'Cached.', usage: { prompt_tokens: 1000, completion_tokens: 10, prompt_tokens_details: { cached_tokens: 800 } } });
    const res = await openai()
      .chat.completions.create({ model: 'wire-1', messages: [{ role: 'user', content: 'Hi' }] })
      .withResponse();
    expect(res.data.usage!.prompt_tokens_details).toEqual({ cached_tokens: 800 });
    // 200 at $1, 800 at $0.50, 10 at $2 per million: 620 µ$.
    await expectOneOutcome(t, res.response.headers.get('x-svc-request-id')!, { status: 'succeeded', promptTokens: 1000, costMicros: 620n });
    const msg = await anthropic().messages.create({ model: 'wire-1', max_tokens: 50, messages: [{ role: 'user', content: 'Hi' }] });
    expect(msg.usage).toMatchObject({ input_tokens: 200, cache_read_input_tokens: 800, cache_creation_input_tokens: 0, output_tokens: 10 });
  });

  it('the providers file takes cache prices per model and refuses one that is not a price, naming it', () => {
    const doc = (price: unknown) => ({
      providers: [{ name: 'p', kind: 'mock', region: 'local', models: [{ id: 'm', input_per_mtok: 1, output_per_mtok: 2, cache_read_per_mtok: price }] }],
    });
    expect(loadConfig({ SVC_PROVIDERS_FILE: writeProvidersFile(doc(0.1)) }).providers[0]!.models[0]).toMatchObject({ cacheReadPerMtok: 0.1 });
    expect(() => loadConfig({ SVC_PROVIDERS_FILE: writeProvidersFile(doc(-1)) })).toThrow(/providers\[0\]\.models\[0\]\.cache_read_per_mtok/);
    expect(() => loadConfig({ SVC_PROVIDERS_FILE: writeProvidersFile(doc(0.0000001)) })).toThrow(/cache_read_per_mtok/);
  });
});
