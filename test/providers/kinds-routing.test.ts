import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ProviderSpec } from '../../src/providers/config-file.ts';
import { parseProvidersDocument } from '../../src/providers/config-file.ts';
import { ProviderRegistry, RoutingError } from '../../src/providers/router.ts';
import { FakeClock } from '../helpers/clock.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../helpers/fake-anthropic.ts';
import { startFakeAzureOpenAI, type FakeAzureOpenAI } from '../helpers/fake-azure-openai.ts';
import { startFakeBedrock, type FakeBedrock } from '../helpers/fake-bedrock.ts';
import { startFakeGemini, type FakeGemini } from '../helpers/fake-gemini.ts';
import { collect, textOf } from './kinds.fixtures.ts';

const ENV = { A_KEY: 'sk-ant-k', G_KEY: 'AIza-k', Z_KEY: 'azure-k', AWS_ID: 'AKIAROUTINGTEST00001', AWS_SECRET: 'routing-secret' };
let claude: FakeAnthropic;
let gem: FakeGemini;
let br: FakeBedrock;
let az: FakeAzureOpenAI;
let clock: FakeClock;
let registry: ProviderRegistry;
let specs: ProviderSpec[];

const shared = (price: number) => [{ id: 'shared', input_per_mtok: price, output_per_mtok: price }];

beforeAll(async () => {
  [claude, gem, br, az] = await Promise.all([
    startFakeAnthropic(ENV.A_KEY),
    startFakeGemini(ENV.G_KEY),
    startFakeBedrock({ accessKeyId: ENV.AWS_ID, secretAccessKey: ENV.AWS_SECRET }, 'us-east-1'),
    startFakeAzureOpenAI(ENV.Z_KEY, ['shared']),
  ]);
  specs = parseProvidersDocument(
    {
      providers: [
        // Cheapest first: claude, gem, br, az.
        { name: 'claude', kind: 'anthropic', base_url: claude.url, api_key_env: 'A_KEY', region: 'us-east-1', models: shared(1) },
        { name: 'gem', kind: 'gemini', base_url: gem.url, api_key_env: 'G_KEY', region: 'us-east-1', models: shared(2) },
        {
          name: 'br',
          kind: 'bedrock',
          base_url: br.url,
          region: 'us-east-1',
          aws_region: 'us-east-1',
          aws_access_key_id_env: 'AWS_ID',
          aws_secret_access_key_env: 'AWS_SECRET',
          models: shared(3),
        },
        { name: 'az', kind: 'azure_openai', base_url: az.url, api_key_env: 'Z_KEY', api_version: '2024-10-21', region: 'us-east-1', models: shared(4) },
      ],
    },
    ENV,
  );
});
afterAll(async () => {
  await Promise.all([claude.close(), gem.close(), br.close(), az.close()]);
});
// A fresh registry per test: fresh circuits.
beforeEach(() => {
  clock = new FakeClock();
  registry = new ProviderRegistry(specs, { clock, failureThreshold: 2, cooldownMs: 10_000, routingTimeoutMs: 10_000 });
  claude.set({ text: 'from claude' });
  gem.set({ text: 'from gemini' });
  br.set({ text: 'from bedrock' });
  az.set({ text: 'from azure' });
});

afterEach(() => registry.close());

const ask = () => registry.complete(registry.routesForModel('shared'), { messages: [{ role: 'user', content: 'Hi' }], sampling: {} });

describe('fallback and the circuit breaker across provider kinds', () => {
  it('builds each kind\'s adapter from the providers file', () => {
    expect(registry.routesForModel('shared').map((r) => `${r.id}:${r.provider.kind}`)).toEqual([
      'claude/shared:anthropic',
      'gem/shared:gemini',
      'br/shared:bedrock',
      'az/shared:azure_openai',
    ]);
  });

  it('falls back from an anthropic 5xx to gemini, and from there over a 429 to bedrock', async () => {
    claude.set({ status: 529, error: 'Overloaded' });
    let routed = await ask();
    expect([routed.route.id, routed.value.content, routed.attempts]).toEqual(['gem/shared', 'from gemini', ['claude/shared', 'gem/shared']]);
    gem.set({ status: 429 });
    routed = await ask();
    expect([routed.route.id, routed.value.content]).toEqual(['br/shared', 'from bedrock']);
    expect(routed.attempts).toEqual(['claude/shared', 'gem/shared', 'br/shared']);
  });

  it('does not fall back when a kind rejects the request itself (400)', async () => {
    claude.set({ status: 400, error: 'max_tokens: too large' });
    const before = gem.requests.length;
    const err = await ask().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RoutingError);
    expect((err as RoutingError).code).toBe('invalid_request');
    expect((err as RoutingError).message).toContain('max_tokens: too large');
    expect(gem.requests.length).toBe(before);
  });

  it('opens a stream on the next kind when the first fails before answering', async () => {
    claude.set({ status: 500 });
    gem.set({ status: 503 });
    const routed = await registry.openStream(registry.routesForModel('shared'), { messages: [{ role: 'user', content: 'Hi' }], sampling: {} }, new AbortController().signal);
    expect(routed.route.id).toBe('br/shared');
    expect(textOf(await collect(routed.value))).toBe('from bedrock');
  });

  it('opens the circuit of a failing kind, skips it, and probes it again after the cool-down', async () => {
    br.set({ status: 500 });
    claude.set({ status: 500 });
    gem.set({ status: 500 });
    await ask(); // claude, gem, br fail; az answers
    await ask(); // the second failure of each: their circuits open
    expect(['claude', 'gem', 'br', 'az'].map((n) => registry.circuitState(n))).toEqual(['open', 'open', 'open', 'closed']);
    const seen = [claude, gem, br].map((f) => f.requests.length);
    const routed = await ask();
    expect([routed.route.id, routed.attempts]).toEqual(['az/shared', ['az/shared']]);
    expect([claude, gem, br].map((f) => f.requests.length)).toEqual(seen);

    claude.set({ text: 'from claude' });
    clock.advance(10_000);
    const probed = await ask();
    expect(probed.route.id).toBe('claude/shared');
    expect(registry.circuitState('claude')).toBe('closed');
  });
});
