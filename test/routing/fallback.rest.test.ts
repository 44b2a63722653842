import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProviderRegistry } from '../../src/providers/router.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp, swapPiece } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { expectOneOutcome, user, writeProvidersFile } from '../inference/fixtures.ts';

/** A port nothing listens on: connection refused. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

const HOP_TIMEOUT_MS = 600;
const ROUTING_TIMEOUT_MS = 1000;
const COOLDOWN_MS = 30_000;

let t: TestApp;
let api: Client;
let projectId: string;
let primary: MockOpenAI;
let secondary: MockOpenAI;

beforeAll(async () => {
  [primary, secondary] = await Promise.all([startMockOpenAI(), startMockOpenAI()]);
  const dead = await closedPort();
  const provider = (name: string, url: string, price: number, models = ['gpt-test']) => ({
    name,
    kind: 'openai',
    base_url: url,
    region: 'eu-west-1',
    timeout_ms: HOP_TIMEOUT_MS,
    models: models.map((id) => ({ id, input_per_mtok: price, output_per_mtok: price })),
  });
  const file = writeProvidersFile({
    providers: [
      provider('primary', primary.url, 1),
      provider('secondary', secondary.url, 2),
      // Cheapest for gpt-conn, but nothing listens there.
      provider('dead', `http://127.0.0.1:${dead}/v1`, 0.5, ['gpt-conn']),
      provider('alive', secondary.url, 5, ['gpt-conn']),
      // The only provider of gpt-solo, on the primary mock: its own timeout (600 ms) ends before the routing timeout.
      provider('solo', primary.url, 1, ['gpt-solo']),
    ],
  });
  t = await buildTestApp({
    env: {
      SVC_PROVIDERS_FILE: file,
      SVC_CIRCUIT_FAILURES: '2',
      SVC_CIRCUIT_COOLDOWN_MS: String(COOLDOWN_MS),
      SVC_ROUTING_TIMEOUT_MS: String(ROUTING_TIMEOUT_MS),
    },
  });
  const seeded = await seedProject(client(t.app), { plan: 'growth' });
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
});
afterAll(async () => {
  await t.close();
  await Promise.all([primary.close(), secondary.close()]);
});
/** Fresh circuit breakers: the registry rebuilt from the same providers file, its timeouts as given. */
async function freshRegistry(timeouts: { hopMs?: number; routingMs?: number } = {}): Promise<void> {
  await t.deps.providers.close();
  const specs = timeouts.hopMs === undefined ? t.config.providers : t.config.providers.map((p) => ({ ...p, timeoutMs: timeouts.hopMs! }));
  swapPiece(t.deps, 'providers', new ProviderRegistry(specs, {
    clock: t.clock,
    log: t.deps.log,
    failureThreshold: t.config.circuitFailureThreshold,
    cooldownMs: t.config.circuitCooldownMs,
    routingTimeoutMs: timeouts.routingMs ?? t.config.routingTimeoutMs,
  }));
}

beforeEach(async () => {
  primary.reset();
  secondary.reset();
  await freshRegistry();
});

const infer = (model = 'gpt-test') => api.post('/v1/inference', { model, project_id: projectId, messages: user('fallback') });

describe('fallback', () => {
  it('falls back to the next provider in price order on a 5xx', async () => {
    primary.set({ status: 502 });
    const res = await infer();
    expect(res.status).toBe(200);
    expect(res.body.route).toBe('secondary/gpt-test');
    expect([primary.calls, secondary.calls]).toEqual([1, 1]);
    // Costed at the provider that answered: 8 + 8 characters at $2 per million each = 32 µ$.
    expect(res.body.cost_usd).toBe(0.000032);
    await expectOneOutcome(t, res.body.request_id, { status: 'succeeded', route: 'secondary/gpt-test', costMicros: 32n });
  });

  it('falls back on a 429 from the provider', async () => {
    primary.set({ status: 429 });
    const res = await infer();
    expect(res.body.route).toBe('secondary/gpt-test');
  });

  it('falls back on a connection error', async () => {
    const res = await infer('gpt-conn');
    expect(res.status).toBe(200);
    expect(res.body.route).toBe('alive/gpt-conn');
  });

  it('falls back when a provider does not answer within its timeout', async () => {
    primary.set({ hang: true });
    const started = performance.now();
    const res = await infer();
    expect(res.status).toBe(200);
    expect(res.body.route).toBe('secondary/gpt-test');
    expect(performance.now() - started).toBeGreaterThanOrEqual(HOP_TIMEOUT_MS - 50);
    // The hung request was torn down, not left open.
    await expect.poll(() => primary.aborted).toBe(1);
  });

  it('does not fall back when the provider refuses the request itself (400)', async () => {
    primary.set({ status: 400 });
    const res = await infer();
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toContain('provider rejected the request');
    expect(secondary.calls).toBe(0);
    await expectOneOutcome(t, res.body.error.request_id, { status: 'failed', errorCode: 'invalid_request', route: 'primary/gpt-test' });
  });

  it('passes a rejection on without anything shaped like a credential in it', async () => {
    primary.set({ status: 400, errorMessage: () => 'bad request; key used: Bearer sk-live-abcdefgh12345678, hook whsec_0123456789abcdef' });
    const res = await infer();
    expectError(res, 400, 'invalid_request');
    expect(res.body.error.message).toContain('bad request; key used: Bearer [redacted]');
    expect(res.raw).not.toContain('abcdefgh12345678');
    expect(res.raw).not.toContain('whsec_0123456789abcdef');
  });

  it('answers 503 model_unavailable when every provider fails', async () => {
    primary.set({ status: 500 });
    secondary.set({ status: 503 });
    const res = await infer();
    expectError(res, 503, 'model_unavailable');
    expect([primary.calls, secondary.calls]).toEqual([1, 1]);
    await expectOneOutcome(t, res.body.error.request_id, {
      status: 'failed',
      errorCode: 'model_unavailable',
      route: 'secondary/gpt-test',
      costMicros: 0n,
    });
  });

  it('answers 408 routing_timeout when all hops together exceed the routing timeout', async () => {
    primary.set({ hang: true });
    secondary.set({ hang: true });
    const started = performance.now();
    const res = await infer();
    const took = performance.now() - started;
    expectError(res, 408, 'routing_timeout');
    expect(took).toBeGreaterThanOrEqual(ROUTING_TIMEOUT_MS - 50);
    expect(took).toBeLessThan(ROUTING_TIMEOUT_MS + 1000);
    expect([primary.calls, secondary.calls]).toEqual([1, 1]);
    await expectOneOutcome(t, res.body.error.request_id, { status: 'failed', errorCode: 'routing_timeout', route: 'secondary/gpt-test' });
  });
});

describe('timeouts', () => {
  it('answers 408 routing_timeout when every hop tried ran into its own timeout', async () => {
    primary.set({ hang: true });
    const started = performance.now();
    const res = await infer('gpt-solo');
    expectError(res, 408, 'routing_timeout');
    expect(res.body.error.message).toContain('timed out');
    expect(performance.now() - started).toBeLessThan(ROUTING_TIMEOUT_MS);
    await expectOneOutcome(t, res.body.error.request_id, { status: 'failed', errorCode: 'routing_timeout', route: 'solo/gpt-solo' });
  });

  it('answers 503 model_unavailable when the hops failed otherwise, a timeout among them', async () => {
    primary.set({ hang: true });
    secondary.set({ status: 500 });
    const res = await api.post('/v1/inference', { model: 'gpt-test', project_id: projectId, messages: user('mixed') });
    expectError(res, 503, 'model_unavailable');
  });
});

describe('circuit breaker', () => {
  // These are about the breaker (on the injected clock), not about timeouts: the hops' real-time budgets are made
  // long, so that a provider answering slowly while the whole suite loads both cores is not a failure. (With 600 ms,
  // the probe once fell back to the secondary in a full embedded run.)
  beforeEach(async () => {
    await freshRegistry({ hopMs: 10_000, routingMs: 20_000 });
  });

  it('opens after consecutive failures, skips the provider, probes after the cool-down and closes on success', async () => {
    primary.set({ status: 500 });
    for (let i = 0; i < 2; i++) expect((await infer()).body.route).toBe('secondary/gpt-test');
    expect(primary.calls).toBe(2);
    expect(t.deps.providers.circuitState('primary')).toBe('open');

    // Open: the provider is not even called.
    primary.set({});
    expect((await infer()).body.route).toBe('secondary/gpt-test');
    expect(primary.calls).toBe(2);

    // Just before the cool-down it is still skipped; once it has passed, one probe goes through and closes it.
    t.clock.advance(COOLDOWN_MS - 1);
    expect((await infer()).body.route).toBe('secondary/gpt-test');
    expect(primary.calls).toBe(2);
    t.clock.advance(1);
    expect(t.deps.providers.circuitState('primary')).toBe('half_open');
    expect((await infer()).body.route).toBe('primary/gpt-test');
    expect(primary.calls).toBe(3);
    expect(t.deps.providers.circuitState('primary')).toBe('closed');
    expect((await infer()).body.route).toBe('primary/gpt-test');
  });

  it('re-opens when the probe fails', async () => {
    primary.set({ status: 500 });
    await infer();
    await infer();
    t.clock.advance(COOLDOWN_MS);
    expect((await infer()).body.route).toBe('secondary/gpt-test');
    expect(primary.calls).toBe(3);
    expect(t.deps.providers.circuitState('primary')).toBe('open');
    await infer();
    expect(primary.calls).toBe(3);
  });

  it('answers 503 without calling anyone when every circuit is open', async () => {
    primary.set({ status: 500 });
    secondary.set({ status: 500 });
    await infer();
    await infer();
    expect([primary.calls, secondary.calls]).toEqual([2, 2]);
    const res = await infer();
    expectError(res, 503, 'model_unavailable');
    expect([primary.calls, secondary.calls]).toEqual([2, 2]);
    await expectOneOutcome(t, res.body.error.request_id, { status: 'failed', errorCode: 'model_unavailable', route: null });
  });

  it('counts only consecutive failures', async () => {
    primary.set({ status: 500 });
    await infer();
    primary.set({});
    await infer();
    primary.set({ status: 500 });
    await infer();
    expect(t.deps.providers.circuitState('primary')).toBe('closed');
  });
});
