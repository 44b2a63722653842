import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../helpers/fake-anthropic.ts';
import { startFakeGemini, type FakeGemini } from '../helpers/fake-gemini.ts';
import { expectOneOutcome, writeProvidersFile } from '../inference/fixtures.ts';

/**
 * The shared SSE writer (src/api/routes/event-stream.ts) answering a provider that fails after the first token, and a
 * provider that is down, as each inbound protocol's clients expect: Anthropic's `event: error` (overloaded_error,
 * svc_code model_unavailable) after the events already sent and nothing after it, Google's error object as the last
 * chunk; a 503 before the first token as Anthropic's overloaded_error (the SDK's InternalServerError).
 */

const A_KEY = 'sk-ant-gateway-key-0123456789';
const G_KEY = 'AIzaGatewayKey0123456789abcdefghijklmnop';
let t: TestApp;
let origin: string;
let secret: string;
let claude: FakeAnthropic;
let gem: FakeGemini;

beforeAll(async () => {
  [claude, gem] = await Promise.all([startFakeAnthropic(A_KEY), startFakeGemini(G_KEY)]);
  const file = writeProvidersFile({
    providers: [
      { name: 'claude', kind: 'anthropic', base_url: claude.url, api_key_env: 'A_KEY', region: 'local', models: [{ id: 'claude-x', input_per_mtok: 1, output_per_mtok: 1 }] },
      { name: 'gem', kind: 'gemini', base_url: gem.url, api_key_env: 'G_KEY', region: 'local', models: [{ id: 'gemini-x', input_per_mtok: 1, output_per_mtok: 1 }] },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1000', A_KEY, G_KEY } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  ({ secret } = await seedProject(client(t.app), { plan: 'growth', scopes: ['inference:write'] }));
}, 240_000);
afterAll(async () => {
  await t?.close();
  await Promise.all([claude?.close(), gem?.close()]);
});
beforeEach(() => {
  claude.set({ text: 'one two three four' });
  gem.set({ text: 'one two three four' });
});

/** The events of a raw SSE body, as [event, data]. */
function events(text: string): Array<[string | null, any]> {
  return text
    .split('\n\n')
    .filter((b) => b.trim() !== '')
    .map((b) => {
      const event = /^event: (.*)$/m.exec(b)?.[1] ?? null;
      return [event, JSON.parse(/^data: (.*)$/m.exec(b)![1]!)];
    });
}

describe('/v1/messages', () => {
  it('a provider failing after the first token: the events so far, then one `error` event in Anthropic\'s shape, and nothing after it', async () => {
    claude.set({ text: 'one two three four', streamError: 'upstream fell over' });
    const res = await fetch(`${origin}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': secret, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-x', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'Count' }] }),
    });
    expect(res.status).toBe(200);
    const list = events(await res.text());
    expect(list.map(([e]) => e)).toEqual(['message_start', 'ping', 'content_block_start', 'content_block_delta', 'error']);
    const [, error] = list.at(-1)!;
    expect(error).toMatchObject({
      type: 'error',
      error: { type: 'overloaded_error', svc_code: 'model_unavailable', message: 'The model provider failed in the middle of the response.' },
      request_id: res.headers.get('request-id'),
    });
    await expectOneOutcome(t, res.headers.get('request-id')!, { status: 'failed', errorCode: 'model_unavailable', route: 'claude/claude-x' });
  });

  it('the SDK throws that error from messages.stream()', async () => {
    claude.set({ text: 'one two three four', streamError: 'upstream fell over' });
    const stream = new Anthropic({ baseURL: origin, apiKey: secret, maxRetries: 0 }).messages.stream({ model: 'claude-x', max_tokens: 50, messages: [{ role: 'user', content: 'Count' }] });
    const err = await stream.finalMessage().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(((err as InstanceType<typeof Anthropic.APIError>).error as any).error).toMatchObject({ type: 'overloaded_error', svc_code: 'model_unavailable' });
  });

  it('a provider that is down before the first token: 503 overloaded_error (the SDK\'s InternalServerError)', async () => {
    claude.set({ status: 503, error: 'down for maintenance' });
    const err = await new Anthropic({ baseURL: origin, apiKey: secret, maxRetries: 0 }).messages
      .create({ model: 'claude-x', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'Count' }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect((err as InstanceType<typeof Anthropic.InternalServerError>).status).toBe(503);
    expect(((err as InstanceType<typeof Anthropic.APIError>).error as any).error).toMatchObject({ type: 'overloaded_error', svc_code: 'model_unavailable' });
  });
});

describe(':streamGenerateContent', () => {
  it('a provider failing after the first token: the chunks so far, then Google\'s error object as the last chunk', async () => {
    gem.set({ text: 'one two three four', streamError: 'backend exploded' });
    const res = await fetch(`${origin}/v1beta/models/gemini-x:streamGenerateContent?alt=sse`, {
      method: 'POST',
      headers: { 'x-goog-api-key': secret, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Count' }] }] }),
    });
    expect(res.status).toBe(200);
    const list = events(await res.text());
    expect(list.length).toBeGreaterThanOrEqual(2);
    expect(list.slice(0, -1).every(([e, d]) => e === null && Array.isArray(d.candidates))).toBe(true);
    const [event, error] = list.at(-1)!;
    expect(event).toBeNull();
    expect(error.error).toMatchObject({ code: 503, status: 'UNAVAILABLE', details: [{ reason: 'model_unavailable', domain: 'svc' }] });
  });

  it('before the first token: the SDK throws ApiError 503 UNAVAILABLE', async () => {
    gem.set({ status: 503, error: 'down' });
    const sdk = new GoogleGenAI({ apiKey: secret, httpOptions: { baseUrl: origin } });
    const err = await sdk.models.generateContentStream({ model: 'gemini-x', contents: 'Count' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(503);
    expect((err as ApiError).message).toContain('"reason":"model_unavailable"');
  });
});
