import fc from 'fast-check';
import { ApiError, FunctionCallingConfigMode, GoogleGenAI, Type, type Content } from '@google/genai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../helpers/fake-anthropic.ts';
import { startFakeGemini, type FakeGemini } from '../helpers/fake-gemini.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { ERRORS, isErrorCode } from '../../src/errors/codes.ts';
import { expectNoOutcome, expectOneOutcome, writeProvidersFile } from './fixtures.ts';

/**
 * The Gemini API inbound (CONTRACT §19) with the real `@google/genai` SDK pointed at the gateway
 * (`httpOptions.baseUrl`, the svc key as its apiKey): generateContent, generateContentStream, countTokens and
 * embedContent (one and several contents: batchEmbedContents), routed to the built-in mock kind, to an openai-kind
 * provider (a local OpenAI-wire server) and to a gemini-kind provider (the local Gemini wire server). Errors in
 * Google's shape as the SDK surfaces them (ApiError, status), the svc code in an ErrorInfo detail.
 */

const G_KEY = 'AIzaGatewayKey0123456789abcdefghijklmnop';
const A_KEY = 'sk-ant-gateway-key-0123456789';
let t: TestApp;
let wire: MockOpenAI;
let gem: FakeGemini;
let claude: FakeAnthropic;
let origin: string;
let secret: string;
let readOnly: string;
let projectId: string;
let api: Client;

beforeAll(async () => {
  [wire, gem, claude] = await Promise.all([startMockOpenAI(), startFakeGemini(G_KEY), startFakeAnthropic(A_KEY)]);
  const price = (id: string, type?: 'embedding') => ({ id, input_per_mtok: 1, output_per_mtok: 2, ...(type ? { type } : {}) });
  const file = writeProvidersFile({
    providers: [
      { name: 'builtin', kind: 'mock', region: 'local', models: [price('mock-1'), price('mock-embed-1', 'embedding')] },
      { name: 'wire', kind: 'openai', base_url: wire.url, region: 'local', timeout_ms: 5000, models: [price('wire-1'), price('wire-embed-1', 'embedding')] },
      { name: 'gem', kind: 'gemini', base_url: gem.url, api_key_env: 'G_KEY', region: 'local', timeout_ms: 5000, models: [price('gemini-flash'), price('gemini-embed', 'embedding')] },
      { name: 'claude', kind: 'anthropic', base_url: claude.url, api_key_env: 'A_KEY', region: 'local', timeout_ms: 5000, models: [price('claude-x')] },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1000', G_KEY, A_KEY } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  const seeded = await seedProject(client(t.app), { plan: 'growth', scopes: ['inference:write', 'usage:read'] });
  secret = seeded.secret;
  projectId = seeded.projectId;
  api = client(t.app, secret);
  const other = await client(t.app).post('/v1/keys', { project_id: projectId, name: 'reader', scopes: ['usage:read'] });
  readOnly = other.body.secret;
}, 240_000);
afterAll(async () => {
  await t?.close();
  await Promise.all([wire?.close(), gem?.close(), claude?.close()]);
});
beforeEach(() => {
  wire.reset();
  gem.set({ text: 'Hello from Gemini.' });
  claude.set({ text: 'Hello from Claude.' });
});

const sdk = (key = secret) => new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: origin } });

/** The gateway's request id of the last answer (every answer carries X-Svc-Request-Id). */
const requestIdOf = (r: { sdkHttpResponse?: { headers?: Record<string, string> } }) => r.sdkHttpResponse!.headers!['x-svc-request-id']!;

/** What the SDK threw: an ApiError whose message is Google's error body as JSON. */
async function apiError(call: Promise<unknown>): Promise<{ status: number; body: any }> {
  const err = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  const e = err as ApiError;
  const json = e.message.slice(e.message.indexOf('{'));
  return { status: e.status, body: JSON.parse(json) };
}

const reasonOf = (body: any) => body.error.details.find((d: any) => d['@type'] === 'type.googleapis.com/google.rpc.ErrorInfo');

const weather = {
  functionDeclarations: [
    {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING } }, required: ['city'] },
    },
  ],
};

describe.each([
  { via: 'the built-in mock kind', chat: 'mock-1', embed: 'mock-embed-1', route: 'builtin/mock-1', dims: 256 },
  { via: 'an openai-kind provider', chat: 'wire-1', embed: 'wire-embed-1', route: 'wire/wire-1', dims: 256 },
  { via: 'a gemini-kind provider', chat: 'gemini-flash', embed: 'gemini-embed', route: 'gem/gemini-flash', dims: 4 },
])('@google/genai through $via', ({ chat, embed, route, dims }) => {
  const gemini = chat === 'gemini-flash';
  const expected = (prompt: string) => (gemini ? 'Hello from Gemini.' : prompt);

  it('generateContent answers with text, usageMetadata and the inference id, and leaves one usage record', async () => {
    const res = await sdk().models.generateContent({ model: chat, contents: 'Say hello', config: { systemInstruction: 'Be brief.', maxOutputTokens: 50, temperature: 0.2 } });
    expect(res.text).toBe(expected('Say hello'));
    expect(res.candidates![0]!.finishReason).toBe('STOP');
    expect(res.responseId).toMatch(/^inf_/);
    expect(res.modelVersion).toBe(chat);
    const u = res.usageMetadata!;
    expect(u.promptTokenCount).toBeGreaterThan(0);
    expect(u.totalTokenCount).toBe(u.promptTokenCount! + u.candidatesTokenCount!);
    const record = await expectOneOutcome(t, requestIdOf(res), { status: 'succeeded', route });
    expect(record.promptTokens).toBe(u.promptTokenCount);
    expect(record.completionTokens).toBe(u.candidatesTokenCount);
    if (gemini) {
      // The gemini kind sent Gemini's wire format on: the system instruction and the generation config carried.
      const sent = gem.last().body;
      expect(sent.systemInstruction).toEqual({ parts: [{ text: 'Be brief.' }] });
      expect(sent.generationConfig).toEqual({ temperature: 0.2, maxOutputTokens: 50 });
    }
  });

  it('calls a function, then answers once the function has answered', async () => {
    if (gemini) gem.set({ toolCalls: [{ id: 'unused', name: 'get_weather', input: { city: 'Paris' } }] });
    const ai = sdk();
    const contents: Content[] = [{ role: 'user', parts: [{ text: 'Weather in Paris?' }] }];
    const first = await ai.models.generateContent({
      model: chat,
      contents,
      config: { tools: [weather], toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: ['get_weather'] } } },
    });
    const call = first.functionCalls![0]!;
    expect(call.name).toBe('get_weather');
    expect(typeof call.args!.city).toBe('string');
    expect(first.candidates![0]!.finishReason).toBe('STOP');

    if (gemini) gem.set({ text: 'Sunny in Paris.' });
    contents.push(first.candidates![0]!.content!, { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { forecast: 'sunny' } } }] });
    const second = await ai.models.generateContent({ model: chat, contents, config: { tools: [weather] } });
    expect(second.functionCalls).toBeUndefined();
    expect(second.text).toContain(gemini ? 'Sunny in Paris.' : 'sunny');
    if (gemini) {
      // The call and its response went to Gemini paired by id and name.
      const sent = gem.last().body;
      const [, model, fn] = sent.contents;
      expect(model.parts[0].functionCall).toMatchObject({ name: 'get_weather', args: { city: 'Paris' } });
      expect(fn.parts[0].functionResponse).toEqual({ id: model.parts[0].functionCall.id, name: 'get_weather', response: { forecast: 'sunny' } });
    }
  });

  it('generateContentStream streams the text, the last chunk with finishReason and usage; one usage record', async () => {
    const stream = await sdk().models.generateContentStream({ model: chat, contents: 'stream these words please' });
    let text = '';
    let last: any = null;
    for await (const chunk of stream) {
      text += chunk.text ?? '';
      last = chunk;
    }
    expect(text).toBe(expected('stream these words please'));
    expect(last.candidates[0].finishReason).toBe('STOP');
    expect(last.usageMetadata.promptTokenCount).toBeGreaterThan(0);
    expect(last.responseId).toMatch(/^inf_/);
    await expectOneOutcome(t, requestIdOf(last), { status: 'succeeded', route });
  });

  it('streams a function call whole in the last chunk', async () => {
    if (gemini) gem.set({ toolCalls: [{ id: 'unused', name: 'get_weather', input: { city: 'Rome' } }] });
    const stream = await sdk().models.generateContentStream({
      model: chat,
      contents: 'Weather in Rome?',
      config: { tools: [weather], toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY } } },
    });
    const calls = [];
    for await (const chunk of stream) calls.push(...(chunk.functionCalls ?? []));
    expect(calls).toHaveLength(1);
    expect(calls[0]!.name).toBe('get_weather');
    expect(typeof calls[0]!.args!.city).toBe('string');
  });

  it('structured output: responseMimeType application/json with responseSchema answers JSON of that schema', async () => {
    if (gemini) gem.set({ text: '{"city":"Oslo","days":3}' });
    const res = await sdk().models.generateContent({
      model: chat,
      contents: 'A trip as JSON',
      config: {
        responseMimeType: 'application/json',
        responseSchema: { type: Type.OBJECT, properties: { city: { type: Type.STRING }, days: { type: Type.INTEGER } }, required: ['city', 'days'] },
      },
    });
    const parsed = JSON.parse(res.text!);
    expect(typeof parsed.city).toBe('string');
    expect(Number.isInteger(parsed.days)).toBe(true);
    if (gemini) {
      // Sent on as JSON Schema (responseJsonSchema), lower-case types.
      expect(gem.last().body.generationConfig.responseJsonSchema).toMatchObject({ type: 'object', properties: { city: { type: 'string' } } });
    }
  });

  it('countTokens counts the prompt without asking the provider or recording usage', async () => {
    const before = gemini ? gem.requests.length : wire.calls;
    const res = await sdk().models.countTokens({ model: chat, contents: 'How many tokens is this sentence?' });
    expect(res.totalTokens).toBeGreaterThan(0);
    expect(gemini ? gem.requests.length : wire.calls).toBe(before);
    await expectNoOutcome(t, requestIdOf(res));
  });

  it('embedContent embeds one content, and several (batchEmbedContents), with usage records', async () => {
    const one = await sdk().models.embedContent({ model: embed, contents: 'a sentence to embed' });
    expect(one.embeddings).toHaveLength(1);
    expect(one.embeddings![0]!.values).toHaveLength(dims);
    await expectOneOutcome(t, requestIdOf(one), { status: 'succeeded', route: route.replace(chat, embed), completionTokens: 0 });

    const many = await sdk().models.embedContent({ model: embed, contents: ['first', 'second', 'third'] });
    expect(many.embeddings).toHaveLength(3);
    expect(many.embeddings![0]!.values).not.toEqual(many.embeddings![1]!.values);
  });
});

describe('@google/genai through an anthropic-kind provider', () => {
  it('answers, calls a function and takes its response back, translated both ways', async () => {
    const ai = sdk();
    const res = await ai.models.generateContent({ model: 'claude-x', contents: 'hi', config: { systemInstruction: 'Be brief.', maxOutputTokens: 64 } });
    expect(res.text).toBe('Hello from Claude.');
    await expectOneOutcome(t, requestIdOf(res), { status: 'succeeded', route: 'claude/claude-x', promptTokens: 11, completionTokens: 7 });
    expect(claude.last().body).toMatchObject({ system: 'Be brief.', max_tokens: 64, messages: [{ role: 'user' }] });

    claude.set({ toolCalls: [{ id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }] });
    const contents: Content[] = [{ role: 'user', parts: [{ text: 'Weather in Oslo?' }] }];
    const first = await ai.models.generateContent({ model: 'claude-x', contents, config: { tools: [weather] } });
    expect(first.functionCalls).toEqual([{ id: 'toolu_1', name: 'get_weather', args: { city: 'Oslo' } }]);
    claude.set({ text: 'Cold.' });
    contents.push(first.candidates![0]!.content!, { role: 'user', parts: [{ functionResponse: { id: 'toolu_1', name: 'get_weather', response: { temp: -5 } } }] });
    expect((await ai.models.generateContent({ model: 'claude-x', contents, config: { tools: [weather] } })).text).toBe('Cold.');
    const sent = claude.last().body.messages;
    expect(sent[1].content).toEqual([{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } }]);
    expect(sent[2].content[0]).toMatchObject({ type: 'tool_result', tool_use_id: 'toolu_1' });
  });

  it('what the kind cannot carry is 400 naming the Gemini field, recorded as a failed inference', async () => {
    const res = await api.post('/v1beta/models/claude-x:generateContent', { contents: [{ parts: [{ text: 'hi' }] }], generationConfig: { candidateCount: 2 } });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toBe('generationConfig.candidateCount is not supported by the provider kind (anthropic) serving claude-x.');
    expect(reasonOf(res.body).metadata.param).toBe('generationConfig.candidateCount');
    await expectOneOutcome(t, res.headers['x-svc-request-id'] as string, { status: 'failed', errorCode: 'invalid_request' });
  });
});

describe('errors in Google\'s shape', () => {
  it('an unknown model is 400 INVALID_ARGUMENT, the svc code in the ErrorInfo; refused before it was an inference, it leaves no usage record', async () => {
    const { status, body } = await apiError(sdk().models.generateContent({ model: 'no-such-model', contents: 'hi' }));
    expect(status).toBe(400);
    expect(body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    expect(body.error.message).toContain('no-such-model');
    expect(reasonOf(body)).toMatchObject({ reason: 'invalid_request', domain: 'svc', metadata: { param: 'model' } });
    expect(reasonOf(body).metadata.request_id).toMatch(/^req_/);
    // Refused before it was an inference: nothing to record.
    await expectNoOutcome(t, reasonOf(body).metadata.request_id);
  });

  it('a key without inference:write is refused: 403 PERMISSION_DENIED, insufficient_scope', async () => {
    for (const call of [
      () => sdk(readOnly).models.generateContent({ model: 'mock-1', contents: 'hi' }),
      () => sdk(readOnly).models.countTokens({ model: 'mock-1', contents: 'hi' }),
      () => sdk(readOnly).models.embedContent({ model: 'mock-embed-1', contents: 'hi' }),
    ]) {
      const { status, body } = await apiError(call());
      expect(status).toBe(403);
      expect(body.error.status).toBe('PERMISSION_DENIED');
      expect(reasonOf(body).reason).toBe('insufficient_scope');
    }
  });

  it('an unknown key is 401 UNAUTHENTICATED; so is no key', async () => {
    const { status, body } = await apiError(sdk('svc_sk_not_a_real_key_0000000000000000').models.generateContent({ model: 'mock-1', contents: 'hi' }));
    expect(status).toBe(401);
    expect(body.error.status).toBe('UNAUTHENTICATED');
    const bare = await fetch(`${origin}/v1beta/models/mock-1:generateContent`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"contents":[{"parts":[{"text":"hi"}]}]}' });
    expect(bare.status).toBe(401);
    expect((await bare.json()).error.status).toBe('UNAUTHENTICATED');
  });

  it('what the gateway cannot carry is 400 naming the Gemini field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ generationConfig: { topK: 40 } }, 'generationConfig.topK'],
      [{ safetySettings: [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_NONE' }] }, 'safetySettings'],
      [{ contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'audio/wav', data: 'AAAA' } }] }] }, 'contents[0].parts[0].inlineData.mimeType'],
      [{ contents: [{ role: 'user', parts: [{ fileData: { fileUri: 'gs://x/y' } }] }] }, 'contents[0].parts[0].fileData'],
      [{ tools: [{ googleSearch: {} }] }, 'tools[0].googleSearch'],
      [{ generationConfig: { responseMimeType: 'text/x.enum' } }, 'generationConfig.responseMimeType'],
      [{ generationConfig: { temperature: 3 } }, 'generationConfig.temperature'],
      [{ generationConfig: { stopSequences: ['a', 'b', 'c', 'd', 'e'] } }, 'generationConfig.stopSequences'],
      [{ toolConfig: { functionCallingConfig: { mode: 'VALIDATED' } } }, 'toolConfig.functionCallingConfig.mode'],
    ];
    for (const [extra, field] of cases) {
      const res = await api.post('/v1beta/models/mock-1:generateContent', { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], ...extra });
      expect(res.status, field).toBe(400);
      expect(res.body.error.status).toBe('INVALID_ARGUMENT');
      expect(reasonOf(res.body).metadata.param, JSON.stringify(extra)).toBe(field);
      expect(res.body.error.details[1]).toEqual({ '@type': 'type.googleapis.com/google.rpc.BadRequest', fieldViolations: [{ field, description: res.body.error.message }] });
    }
  });

  it('a field a provider kind cannot carry is named as the Gemini request has it', async () => {
    // The gemini kind carries no logprobs: responseLogprobs is refused for its model, by its Gemini name.
    const { status, body } = await apiError(sdk().models.generateContent({ model: 'gemini-flash', contents: 'hi', config: { responseLogprobs: true } }));
    expect(status).toBe(400);
    expect(reasonOf(body).metadata.param).toBe('generationConfig.responseLogprobs');
    expect(body.error.message).toBe('generationConfig.responseLogprobs is not supported by the provider kind (gemini) serving gemini-flash.');
    // An image the gemini kind takes (inlineData), at the right path when a history comes before it.
    const image = await api.post('/v1beta/models/gemini-flash:generateContent', {
      contents: [
        { role: 'user', parts: [{ text: 'hi' }] },
        { role: 'model', parts: [{ text: 'hello' }] },
        { role: 'user', parts: [{ text: 'what is this?' }, { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } }] },
      ],
    });
    expect(image.status).toBe(200);
    expect(gem.last().body.contents[2].parts[1]).toEqual({ inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } });
  });

  it('candidateCount gives one candidate per choice; the gateway\'s own figures are under svc', async () => {
    const res = await api.post('/v1beta/models/mock-1:generateContent', { contents: [{ parts: [{ text: 'twice' }] }], generationConfig: { candidateCount: 2 } });
    expect(res.status).toBe(200);
    expect(res.body.candidates.map((c: any) => [c.index, c.content.parts[0].text, c.finishReason])).toEqual([
      [0, 'twice', 'STOP'],
      [1, 'twice', 'STOP'],
    ]);
    expect(res.body.svc).toMatchObject({ route: 'builtin/mock-1', region: 'local', cache_hit: false, request_id: res.headers['x-svc-request-id'] });
    expect(typeof res.body.svc.cost_usd).toBe('number');
  });

  it('models/auto routes by the project\'s policy', async () => {
    const res = await api.post('/v1beta/models/auto:generateContent', { contents: [{ parts: [{ text: 'route me' }] }] });
    expect(res.status).toBe(200);
    expect(res.body.svc.route).toMatch(/^(builtin|wire|gem|claude)\//);
  });

  it('countTokens takes a whole generateContentRequest; tools count too; another model in it is refused', async () => {
    const url = '/v1beta/models/mock-1:countTokens';
    const contents = [{ role: 'user', parts: [{ text: 'count me' }] }];
    const plain = await api.post(url, { contents });
    const withTools = await api.post(url, { generateContentRequest: { model: 'models/mock-1', contents, tools: [weather], systemInstruction: { parts: [{ text: 'sys' }] } } });
    expect(plain.status).toBe(200);
    expect(withTools.body.totalTokens).toBeGreaterThan(plain.body.totalTokens);
    const other = await api.post(url, { generateContentRequest: { model: 'models/wire-1', contents } });
    expect(other.status).toBe(400);
    expect(reasonOf(other.body).metadata.param).toBe('generateContentRequest.model');
    expect(reasonOf((await api.post(url, {})).body).metadata.param).toBe('contents');
  });

  it('a functionResponse that answers no call of the model turn before it is 400 naming it', async () => {
    const res = await api.post('/v1beta/models/mock-1:generateContent', {
      contents: [
        { role: 'user', parts: [{ text: 'hi' }] },
        { role: 'model', parts: [{ text: 'hello' }] },
        { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { ok: true } } }] },
      ],
    });
    expect(res.status).toBe(400);
    expect(reasonOf(res.body).metadata.param).toBe('contents[2].parts[0].functionResponse.name');
  });

  it('an unknown method is 404 NOT_FOUND; streamGenerateContent without alt=sse is 400 naming alt', async () => {
    const unknown = await api.post('/v1beta/models/mock-1:predict', { contents: [{ parts: [{ text: 'hi' }] }] });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.status).toBe('NOT_FOUND');
    const noSse = await api.post('/v1beta/models/mock-1:streamGenerateContent', { contents: [{ parts: [{ text: 'hi' }] }] });
    expect(noSse.status).toBe(400);
    expect(reasonOf(noSse.body).metadata.param).toBe('alt');
  });

  it('a provider failing mid-stream ends the stream with Google\'s error chunk: the SDK throws ApiError', async () => {
    gem.set({ text: 'one two three four', streamError: 'backend exploded' });
    const stream = await sdk().models.generateContentStream({ model: 'gemini-flash', contents: 'hi' });
    let text = '';
    let requestId = '';
    const err = await (async () => {
      for await (const chunk of stream) {
        requestId ||= requestIdOf(chunk);
        text += chunk.text ?? '';
      }
    })().then(
      () => null,
      (e: unknown) => e,
    );
    expect(text).not.toBe('');
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(503);
    expect((err as ApiError).message).toContain('"status":"UNAVAILABLE"');
    expect((err as ApiError).message).toContain('"reason":"model_unavailable"');
    await expectOneOutcome(t, requestId, { status: 'failed', errorCode: 'model_unavailable', route: 'gem/gemini-flash' });
  });
});

describe('the key as Google\'s clients send it', () => {
  it('takes the key from ?key= and never writes it to the logs', async () => {
    const res = await fetch(`${origin}/v1beta/models/mock-1:generateContent?key=${encodeURIComponent(secret)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'by query key' }] }] }),
    });
    expect(res.status).toBe(200);
    expect((await res.json()).candidates[0].content.parts[0].text).toBe('by query key');
    const bad = await fetch(`${origin}/v1beta/models/mock-1:generateContent?key=${encodeURIComponent(`${secret}x`)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"contents":[{"parts":[{"text":"hi"}]}]}',
    });
    expect(bad.status).toBe(401);
    expect(t.logs.text).not.toContain(secret);
  });

  it('the operator addresses a project with ?project_id=', async () => {
    const res = await client(t.app).post(`/v1beta/models/mock-1:generateContent?project_id=${projectId}`, { contents: [{ parts: [{ text: 'operator' }] }] });
    expect(res.status).toBe(200);
    const record = await expectOneOutcome(t, res.headers['x-svc-request-id'] as string, { status: 'succeeded' });
    expect(record.projectId).toBe(projectId);
    const none = await client(t.app).post('/v1beta/models/mock-1:generateContent', { contents: [{ parts: [{ text: 'x' }] }] });
    expect(none.status).toBe(400);
    expect(reasonOf(none.body)).toMatchObject({ reason: 'missing_project_id', metadata: { param: 'project_id' } });
  });
});

describe('inference like any other', () => {
  const body = (text: string, extra: Record<string, unknown> = {}) => ({ contents: [{ role: 'user', parts: [{ text }] }], ...extra });

  it('the token window counts its tokens: over it, 429 RESOURCE_EXHAUSTED rate_limit_exceeded', async () => {
    const p = await seedProject(client(t.app), { scopes: ['inference:write'], limits: { requests_per_minute: 100, tokens_per_minute: 4000, burst: 0 } });
    const limited = client(t.app, p.secret);
    const url = '/v1beta/models/mock-1:generateContent';
    // About 2000 tokens used (the mock reports a token per 4 characters); the clock stands still, so they stay used.
    expect((await limited.post(url, body('y'.repeat(8000), { generationConfig: { maxOutputTokens: 1 } }))).status).toBe(200);
    const res = await limited.post(url, body('x'.repeat(12000), { generationConfig: { maxOutputTokens: 1 } }));
    expect(res.status).toBe(429);
    expect(res.body.error).toMatchObject({ code: 429, status: 'RESOURCE_EXHAUSTED' });
    expect(reasonOf(res.body).reason).toBe('rate_limit_exceeded');
    expect(res.headers['x-svc-request-id']).toMatch(/^req_/);
    expect((await limited.post(url, body('x', { generationConfig: { maxOutputTokens: 10 } }))).status).toBe(200);
  });

  it('budgets hold: once the month\'s budget is spent, 429 budget_exceeded', async () => {
    const p = await seedProject(client(t.app), { scopes: ['inference:write'], budgetUsd: 0.000001 });
    const spender = client(t.app, p.secret);
    expect((await spender.post('/v1beta/models/mock-1:generateContent', body('spend a little of the budget'))).status).toBe(200);
    const stopped = await spender.post('/v1beta/models/mock-1:generateContent', body('and more'));
    expect(stopped.status).toBe(429);
    expect(reasonOf(stopped.body).reason).toBe('budget_exceeded');
  });

  it('PII redaction applies to the text parts before the provider sees them', async () => {
    const p = await seedProject(client(t.app), { scopes: ['inference:write'] });
    expect((await client(t.app).put(`/v1/projects/${p.projectId}/pii`, { redact: true })).status).toBe(200);
    const res = await client(t.app, p.secret).post('/v1beta/models/wire-1:generateContent', body('Mail jane.doe@example.com please'));
    expect(res.status).toBe(200);
    const sent = JSON.stringify(wire.requests.at(-1)!.body.messages);
    expect(sent).not.toContain('jane.doe@example.com');
    expect(sent).toContain('[EMAIL_1]');
  });

  it('the answer is retained like any inference: GET /v1/inference/{responseId}', async () => {
    const res = await sdk().models.generateContent({ model: 'mock-1', contents: 'keep me' });
    const kept = await client(t.app).get(`/v1/inference/${res.responseId}`);
    expect(kept.status).toBe(200);
    expect(kept.body.message.content).toBe('keep me');
    expect(JSON.stringify(kept.body.request)).toContain('keep me');
  });
});

describe('fuzzing the Gemini route', () => {
  const part = fc.oneof(
    fc.record({ text: fc.string({ maxLength: 20 }) }),
    fc.record({ inlineData: fc.record({ mimeType: fc.constantFrom('image/png', 'audio/wav', ''), data: fc.constantFrom('iVBORw0KGgo=', '!!', '') }) }),
    fc.record({ functionCall: fc.record({ name: fc.constantFrom('f', '', 'get_weather'), args: fc.constantFrom({}, { a: 1 }) }) }),
    fc.record({ functionResponse: fc.record({ name: fc.constantFrom('f', 'get_weather'), response: fc.constantFrom({}, { ok: true }) }) }),
    fc.record({ thought: fc.boolean(), text: fc.string({ maxLength: 5 }) }),
    fc.jsonValue({ maxDepth: 2 }),
  );
  const content = fc.record({ role: fc.constantFrom('user', 'model', 'function', 'system', undefined), parts: fc.array(part, { maxLength: 3 }) }, { requiredKeys: ['parts'] });
  const body = fc.oneof(
    fc.record(
      {
        contents: fc.array(content, { maxLength: 3 }),
        systemInstruction: content,
        tools: fc.constantFrom([weather], [{ googleSearch: {} }], []),
        toolConfig: fc.constantFrom({ functionCallingConfig: { mode: 'ANY' } }, { functionCallingConfig: { mode: 'NONE', allowedFunctionNames: ['x'] } }),
        generationConfig: fc.record(
          { maxOutputTokens: fc.integer({ min: -1, max: 3 }), temperature: fc.double({ min: -1, max: 3, noNaN: true }), responseMimeType: fc.constantFrom('application/json', 'text/plain', 'x'), stopSequences: fc.array(fc.string({ maxLength: 3 }), { maxLength: 6 }) },
          { requiredKeys: [] },
        ),
        requests: fc.array(fc.record({ content, outputDimensionality: fc.integer({ min: 0, max: 5 }) }), { maxLength: 2 }),
        content,
      },
      { requiredKeys: [] },
    ),
    fc.jsonValue({ maxDepth: 3 }),
  );
  const path = fc.tuple(
    fc.constantFrom('mock-1', 'mock-embed-1', 'wire-1', 'gemini-flash', 'gemini-embed', '', 'x/y', '%00', 'a:b'),
    fc.constantFrom('generateContent', 'streamGenerateContent', 'countTokens', 'embedContent', 'batchEmbedContents', 'nope', ''),
  );

  it('answers only documented statuses and svc codes in Google\'s shape, never 500, never the key', async () => {
    await fc.assert(
      fc.asyncProperty(path, fc.option(body, { nil: undefined }), fc.constantFrom('', '?alt=sse', '?alt=json', '?x=1', '?project_id=%00'), async ([model, method], payload, query) => {
        const res = await t.app.inject({
          method: 'POST',
          url: `/v1beta/models/${model}:${method}${query}`,
          headers: { 'x-goog-api-key': secret, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}) },
          payload: payload === undefined ? undefined : JSON.stringify(payload),
        });
        expect(res.statusCode, `${model}:${method}${query} ${res.body}`).not.toBe(500);
        expect(res.body).not.toContain(secret);
        if (res.statusCode >= 400) {
          const e = JSON.parse(res.body).error;
          const reason = e.details[0].reason;
          expect(isErrorCode(reason), res.body).toBe(true);
          expect(e.code).toBe(res.statusCode);
          if (res.statusCode !== 413) expect(res.statusCode, res.body).toBe(ERRORS[reason as keyof typeof ERRORS].http);
          expect(res.headers['x-svc-request-id']).toBe(e.details[0].metadata.request_id);
        } else expect(res.statusCode).toBe(200);
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
