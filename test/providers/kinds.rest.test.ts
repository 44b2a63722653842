import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../helpers/fake-anthropic.ts';
import { startFakeAzureOpenAI, type FakeAzureOpenAI } from '../helpers/fake-azure-openai.ts';
import { startFakeBedrock, type FakeBedrock } from '../helpers/fake-bedrock.ts';
import { startFakeGemini, type FakeGemini } from '../helpers/fake-gemini.ts';
import { expectOneOutcome, user, writeProvidersFile } from '../inference/fixtures.ts';

const ENV = { A_KEY: 'sk-ant-gateway-key-0123456789', G_KEY: 'AIzaGatewayKey0123456789abcdefghijklmnop', Z_KEY: 'azure-gateway-key', AWS_ID: 'AKIAGATEWAYTEST00001', AWS_SECRET: 'gateway-secret' };
let claude: FakeAnthropic;
let gem: FakeGemini;
let br: FakeBedrock;
let az: FakeAzureOpenAI;
let t: TestApp;
let api: Client;
let projectId: string;

const model = (id: string, price = 1) => ({ id, input_per_mtok: price, output_per_mtok: price });

beforeAll(async () => {
  [claude, gem, br, az] = await Promise.all([
    startFakeAnthropic(ENV.A_KEY),
    startFakeGemini(ENV.G_KEY),
    startFakeBedrock({ accessKeyId: ENV.AWS_ID, secretAccessKey: ENV.AWS_SECRET }, 'eu-central-1'),
    startFakeAzureOpenAI(ENV.Z_KEY, ['gpt-4o-prod']),
  ]);
  const file = writeProvidersFile({
    providers: [
      { name: 'claude', kind: 'anthropic', base_url: claude.url, api_key_env: 'A_KEY', region: 'eu-west-1', models: [model('claude-sonnet'), model('shared', 1)] },
      { name: 'gem', kind: 'gemini', base_url: gem.url, api_key_env: 'G_KEY', region: 'eu-west-1', models: [model('gemini-flash'), model('shared', 2)] },
      {
        name: 'br',
        kind: 'bedrock',
        base_url: br.url,
        region: 'eu-west-1',
        aws_region: 'eu-central-1',
        aws_access_key_id_env: 'AWS_ID',
        aws_secret_access_key_env: 'AWS_SECRET',
        models: [model('anthropic.claude-3-haiku-20240307-v1:0')],
      },
      { name: 'az', kind: 'azure_openai', base_url: az.url, api_key_env: 'Z_KEY', api_version: '2024-10-21', region: 'eu-west-1', models: [{ ...model('gpt-4o'), deployment: 'gpt-4o-prod' }] },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1000', ...ENV } });
  const seeded = await seedProject(client(t.app), { plan: 'growth' });
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
  // Four fakes and an app with its own database: slow on a loaded machine.
}, 180_000);
afterAll(async () => {
  await t.close();
  await Promise.all([claude.close(), gem.close(), br.close(), az.close()]);
});
beforeEach(() => {
  claude.set({ text: 'from claude' });
  gem.set({ text: 'from gemini' });
  br.set({ text: 'from bedrock' });
  az.set({ text: 'from azure' });
});

const infer = (body: Record<string, unknown>) => api.post('/v1/inference', { project_id: projectId, ...body });

describe('POST /v1/inference on each provider kind', () => {
  const cases = [
    ['anthropic', 'claude-sonnet', 'claude/claude-sonnet', 'from claude'],
    ['gemini', 'gemini-flash', 'gem/gemini-flash', 'from gemini'],
    ['bedrock', 'anthropic.claude-3-haiku-20240307-v1:0', 'br/anthropic.claude-3-haiku-20240307-v1:0', 'from bedrock'],
    ['azure_openai', 'gpt-4o', 'az/gpt-4o', 'from azure'],
  ] as const;
  for (const [kind, modelId, route, text] of cases) {
    it(`answers a plain chat through kind ${kind}, with the provider's usage and its cost`, async () => {
      const res = await infer({ model: modelId, messages: [{ role: 'system', content: 'Be brief.' }, ...user('Hello')] });
      expect(res.status).toBe(200);
      // Every fake reports 11 prompt and 7 completion tokens: 18 × $1 per million = 18 µ$.
      expect(res.body).toMatchObject({
        model: modelId,
        route,
        message: { role: 'assistant', content: text },
        finish_reason: 'stop',
        usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
        cost_usd: 0.000018,
      });
      await expectOneOutcome(t, res.body.request_id, { status: 'succeeded', route, promptTokens: 11, completionTokens: 7, costMicros: 18n });
    });
  }

  for (const [kind, modelId, route, text] of cases) {
    it(`streams a chat through kind ${kind}: delta events, then done with the provider's usage`, async () => {
      const res = await infer({ model: modelId, messages: user('Hello'), stream: true });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
      const events = res.raw
        .split(/\n\n/)
        .filter((block) => block.trim() !== '')
        .map((block) => ({
          event: /^event: (.*)$/m.exec(block)?.[1],
          data: JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? 'null'),
        }));
      const deltas = events.filter((e) => e.event === 'delta');
      expect(deltas.length).toBeGreaterThan(1);
      expect(deltas.map((e) => e.data.delta.content).join('')).toBe(text);
      const done = events.at(-1)!;
      expect(done.event).toBe('done');
      expect(done.data).toMatchObject({ route, finish_reason: 'stop', usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } });
    });
  }

  it('falls back from a failing anthropic provider to a gemini one serving the same model', async () => {
    claude.set({ status: 500, error: 'internal' });
    const res = await infer({ model: 'shared', messages: user('Hello') });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ route: 'gem/shared', message: { content: 'from gemini' } });
  });

  it('answers 400 invalid_request when the kind refuses the request itself, without falling back', async () => {
    claude.set({ status: 400, error: 'messages: text content blocks must be non-empty' });
    const before = gem.requests.length;
    const res = await infer({ model: 'shared', messages: user('Hello') });
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toContain('text content blocks must be non-empty');
    expect(gem.requests.length).toBe(before);
  });
});
