import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BedrockProvider, eventStreamMessages, signedHeaders } from '../../src/providers/bedrock.ts';
import { SecretValue } from '../../src/providers/config-file.ts';
import { eventFrame, startFakeBedrock, type FakeBedrock } from '../helpers/fake-bedrock.ts';
import { collect, PERSON_FORMAT, providerError, request, specOf, textOf, TOOL_ROUND_TRIP, toolCallsOf, WEATHER_TOOL } from './kinds.fixtures.ts';

const CREDS = { accessKeyId: 'AKIAFAKEKEY000000001', secretAccessKey: 'fakeSecretAccessKey/0123456789abcdefghijkl', sessionToken: 'FwoGZXIvYXdzEFAKESESSIONTOKEN' };
const MODEL = 'anthropic.claude-3-5-sonnet-20240620-v1:0';
const ENV = { AWS_KEY_ID: CREDS.accessKeyId, AWS_SECRET: CREDS.secretAccessKey, AWS_TOKEN: CREDS.sessionToken };
let fake: FakeBedrock;
let provider: BedrockProvider;

const entry = (more: Record<string, unknown> = {}) => ({
  name: 'br',
  kind: 'bedrock',
  base_url: fake.url,
  region: 'eu-central-1',
  aws_region: 'eu-central-1',
  aws_access_key_id_env: 'AWS_KEY_ID',
  aws_secret_access_key_env: 'AWS_SECRET',
  aws_session_token_env: 'AWS_TOKEN',
  models: [{ id: MODEL, input_per_mtok: 3, output_per_mtok: 15 }],
  ...more,
});

beforeAll(async () => {
  fake = await startFakeBedrock(CREDS, 'eu-central-1');
  provider = new BedrockProvider(specOf(entry(), ENV));
});
afterAll(async () => {
  await provider.close();
  await fake.close();
});
beforeEach(() => fake.set({ text: 'Hello from Bedrock.' }));

const req = (messages: Parameters<typeof request>[0], more: Parameters<typeof request>[1] = {}) => request(messages, { model: MODEL, ...more });

describe('SigV4', () => {
  it("reproduces AWS's published test vectors (get-vanilla's key and scope, post-vanilla)", async () => {
    const aws = { region: 'us-east-1', accessKeyId: new SecretValue('AKIDEXAMPLE'), secretAccessKey: new SecretValue('wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY'), sessionToken: null };
    const headers = await signedHeaders(aws, 'example.amazonaws.com', '/', { 'x-amz-date': '20150830T123600Z' }, '', 'service');
    expect(headers.authorization).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b',
    );
  });

  it('signs every Converse request so that the server, recomputing it, agrees; a wrong secret is refused (403, fallback)', async () => {
    await provider.complete(req([{ role: 'user', content: 'Hi' }]));
    const r = fake.last();
    expect(fake.signatureProblem).toBeNull();
    expect(r.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIAFAKEKEY000000001\/\d{8}\/eu-central-1\/bedrock\/aws4_request, SignedHeaders=[a-z;-]*content-type;host;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}$/,
    );
    expect(r.headers['x-amz-security-token']).toBe(CREDS.sessionToken);
    // The model id's ":" is escaped in the path (and escaped again in the canonical request, as SigV4 wants).
    expect(r.url).toBe('/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse');

    const wrong = new BedrockProvider(specOf(entry({ name: 'br2' }), { ...ENV, AWS_SECRET: 'not-the-secret' }));
    const err = await providerError(wrong.complete(req([{ role: 'user', content: 'Hi' }])));
    expect(fake.signatureProblem).toBe('signature mismatch');
    expect([err.kind, err.status]).toEqual(['status', 403]);
    expect(err.message).toContain('signature');
    await wrong.close();
  });
});

describe('kind bedrock: Converse and ConverseStream', () => {
  it('answers a plain chat: system split out, inferenceConfig, content blocks, usage', async () => {
    const answer = await provider.complete(
      req(
        [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: [{ type: 'text', text: 'Look:' }, { type: 'image_url', image_url: { url: 'data:image/webp;base64,UklGRg==' } }] },
        ],
        { maxTokens: 100, sampling: { temperature: 0.3, top_p: 0.5, stop: 'STOP' } },
      ),
    );
    expect(answer).toEqual({ content: 'Hello from Bedrock.', finishReason: 'stop', usage: { promptTokens: 11, completionTokens: 7 } });
    expect(fake.last().body).toEqual({
      messages: [{ role: 'user', content: [{ text: 'Look:' }, { image: { format: 'webp', source: { bytes: 'UklGRg==' } } }] }],
      system: [{ text: 'Be brief.' }],
      inferenceConfig: { maxTokens: 100, temperature: 0.3, topP: 0.5, stopSequences: ['STOP'] },
    });
  });

  it('streams an answer from event-stream frames split at odd places: deltas, finish, metadata usage', async () => {
    const parts = await collect(await provider.openStream(req([{ role: 'user', content: 'Hi' }])));
    expect(fake.last().pathname).toBe('/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream');
    expect(fake.signatureProblem).toBeNull();
    expect(textOf(parts)).toBe('Hello from Bedrock.');
    expect(parts.filter((p) => p.type === 'delta').length).toBeGreaterThan(1);
    expect(parts.slice(-2)).toEqual([
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: 11, completionTokens: 7 } },
    ]);
  });

  it('translates tools to toolConfig, tool calls to toolUse and tool results to toolResult blocks', async () => {
    fake.set({ toolCalls: [{ id: 'tooluse_1', name: 'get_weather', input: { city: 'Rome' } }] });
    const answer = await provider.complete(req(TOOL_ROUND_TRIP, { options: { tools: [WEATHER_TOOL], tool_choice: 'required' } }));
    expect(answer).toEqual({
      content: '',
      finishReason: 'tool_calls',
      toolCalls: [{ id: 'tooluse_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }],
      usage: { promptTokens: 11, completionTokens: 7 },
    });
    const body = fake.last().body;
    expect(body.toolConfig).toEqual({
      tools: [{ toolSpec: { name: 'get_weather', description: 'The weather in a city', inputSchema: { json: WEATHER_TOOL.function.parameters } } }],
      toolChoice: { any: {} },
    });
    expect(body.messages).toEqual([
      { role: 'user', content: [{ text: 'Weather in Paris and Oslo?' }] },
      {
        role: 'assistant',
        content: [
          { toolUse: { toolUseId: 'call_1', name: 'get_weather', input: { city: 'Paris' } } },
          { toolUse: { toolUseId: 'call_2', name: 'get_weather', input: { city: 'Oslo' } } },
        ],
      },
      {
        role: 'user',
        content: [
          { toolResult: { toolUseId: 'call_1', content: [{ text: '{"temp":21}' }] } },
          { toolResult: { toolUseId: 'call_2', content: [{ text: 'cold' }] } },
        ],
      },
    ]);
    await provider.complete(req([{ role: 'user', content: 'x' }], { options: { tools: [WEATHER_TOOL], tool_choice: { type: 'function', function: { name: 'get_weather' } } } }));
    expect(fake.last().body.toolConfig.toolChoice).toEqual({ tool: { name: 'get_weather' } });
    // tool_choice none without tool blocks in the conversation: the tools are left out.
    await provider.complete(req([{ role: 'user', content: 'x' }], { options: { tools: [WEATHER_TOOL], tool_choice: 'none' } }));
    expect(fake.last().body.toolConfig).toBeUndefined();
    expect(provider.unsupported(req(TOOL_ROUND_TRIP, { options: { tools: [WEATHER_TOOL], tool_choice: 'none' } }))).toBe('tool_choice');
  });

  it('streams a tool call: contentBlockStart with id and name, then the input pieces, finish tool_calls', async () => {
    fake.set({ toolCalls: [{ id: 'tooluse_1', name: 'get_weather', input: { city: 'Rome' } }] });
    const parts = await collect(await provider.openStream(req([{ role: 'user', content: 'Weather?' }], { options: { tools: [WEATHER_TOOL] } })));
    expect(parts.find((p) => p.type === 'tool_call')).toEqual({ type: 'tool_call', index: 0, id: 'tooluse_1', name: 'get_weather', arguments: '' });
    expect(toolCallsOf(parts)).toEqual([{ index: 0, id: 'tooluse_1', name: 'get_weather', arguments: '{"city":"Rome"}' }]);
    expect(parts.find((p) => p.type === 'finish')).toEqual({ type: 'finish', finishReason: 'tool_calls' });
  });

  it('asks for structured output with a forced tool; its input is the answer, also streamed', async () => {
    fake.set({ toolCalls: [{ id: 'tooluse_9', name: 'person', input: { name: 'Ada' } }] });
    const answer = await provider.complete(req([{ role: 'user', content: 'Who?' }], { options: { response_format: PERSON_FORMAT } }));
    expect(answer).toEqual({ content: '{"name":"Ada"}', finishReason: 'stop', usage: { promptTokens: 11, completionTokens: 7 } });
    expect(fake.last().body.toolConfig).toEqual({
      tools: [{ toolSpec: { name: 'person', description: expect.any(String), inputSchema: { json: (PERSON_FORMAT as any).json_schema.schema } } }],
      toolChoice: { tool: { name: 'person' } },
    });
    const parts = await collect(await provider.openStream(req([{ role: 'user', content: 'Who?' }], { options: { response_format: PERSON_FORMAT } })));
    expect(textOf(parts)).toBe('{"name":"Ada"}');
    expect(parts.find((p) => p.type === 'finish')).toEqual({ type: 'finish', finishReason: 'stop' });
  });

  it('names the fields it cannot carry', () => {
    const msg = [{ role: 'user' as const, content: 'x' }];
    expect(provider.unsupported(req(msg, { options: { n: 2 } }))).toBe('n');
    expect(provider.unsupported(req(msg, { sampling: { seed: 1 } }))).toBe('seed');
    expect(provider.unsupported(req(msg, { sampling: { frequency_penalty: 1 } }))).toBe('frequency_penalty');
    expect(provider.unsupported(req(msg, { options: { top_logprobs: 1 } }))).toBe('top_logprobs');
    expect(provider.unsupported(req([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x.test/a.png' } }] }]))).toBe('messages[0].content[0]');
    expect(provider.unsupported(req([{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '[1]' } }] }]))).toBe(
      'messages[0].tool_calls[0].function.arguments',
    );
  });

  it('classifies errors: ValidationException 400 rejected, ThrottlingException 429 and 5xx status, credentials redacted', async () => {
    fake.set({ status: 400, error: 'Malformed input request' });
    let err = await providerError(provider.complete(req([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status]).toEqual(['rejected', 400]);
    expect(err.message).toContain('Malformed input request');
    fake.set({ status: 429, error: 'Too many requests' });
    expect((await providerError(provider.openStream(req([{ role: 'user', content: 'x' }])))).kind).toBe('status');
    fake.set({ status: 500, error: `boom ${CREDS.secretAccessKey} ${CREDS.accessKeyId} AKIAOTHERKEY00000000` });
    err = await providerError(provider.complete(req([{ role: 'user', content: 'x' }])));
    expect([err.kind, err.status]).toEqual(['status', 500]);
    expect(err.message).not.toContain(CREDS.secretAccessKey);
    expect(err.message).not.toContain('AKIA');
  });

  it('fails a stream on an exception frame', async () => {
    fake.set({ text: 'Hello there, friend.', streamError: 'Rate exceeded' });
    const err = await providerError(collect(await provider.openStream(req([{ role: 'user', content: 'x' }]))));
    expect(err.kind).toBe('status');
    expect(err.message).toContain('throttlingException');
    expect(err.message).toContain('Rate exceeded');
  });

  it('refuses a frame whose checksum is wrong', async () => {
    const frame = Buffer.from(eventFrame('event', 'messageStop', { stopReason: 'end_turn' }));
    frame[frame.length - 1]! ^= 0xff;
    await expect(collect(eventStreamMessages((async function* () { yield frame; })()) as any)).rejects.toThrow(/checksum|CRC/i);
  });
});
