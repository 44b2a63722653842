import { describe, expect, it } from 'vitest';
import { MemoryResponseCache } from '../../src/domain/inference/cache.ts';
import { CircuitBreaker } from '../../src/providers/router.ts';
import { cheapestRoutes, planRoutes } from '../../src/domain/routing/plan.ts';
import type { ProviderSpec } from '../../src/providers/config-file.ts';
import { ProviderRegistry } from '../../src/providers/router.ts';
import { sseData } from '../../src/providers/sse.ts';
import { redactCredentials, transportError } from '../../src/providers/upstream.ts';
import { errors as undiciErrors } from 'undici';
import { FakeClock } from '../helpers/clock.ts';

const spec = (name: string, region: string, models: Array<[string, number, number]>): ProviderSpec => ({
  name,
  kind: 'mock',
  baseUrl: null,
  apiKeyEnv: null,
  apiKey: null,
  region,
  timeoutMs: 1000,
  models: models.map(([id, inputPerMtok, outputPerMtok]) => ({ id, type: 'chat' as const, inputPerMtok, outputPerMtok })),
});

const registry = (random?: () => number) =>
  new ProviderRegistry(
    [
      spec('a', 'eu', [['m1', 3, 3], ['m2', 1, 1]]),
      spec('b', 'eu', [['m1', 1, 1]]),
      spec('c', 'us', [['m1', 1, 1]]),
    ],
    { clock: new FakeClock(), failureThreshold: 2, cooldownMs: 1000, routingTimeoutMs: 1000, random },
  );

describe('routes', () => {
  it('orders a model\'s providers cheapest first, ties in file order', () => {
    expect(registry().routesForModel('m1').map((r) => r.id)).toEqual(['b/m1', 'c/m1', 'a/m1']);
  });

  it('orders every route cheapest first for model auto', () => {
    expect(cheapestRoutes(registry()).map((r) => r.id)).toEqual(['a/m2', 'b/m1', 'c/m1', 'a/m1']);
  });

  it('keeps the order of an ordered policy, expanding a target without provider cheapest first', () => {
    const routes = planRoutes(registry(), 'ordered', [
      { provider: 'a', model: 'm1', weight: 1 },
      { provider: null, model: 'm1', weight: 1 },
    ]);
    expect(routes.map((r) => r.id)).toEqual(['a/m1', 'b/m1', 'c/m1']);
  });

  it('sorts a cheapest policy by price', () => {
    const routes = planRoutes(registry(), 'cheapest', [
      { provider: 'a', model: 'm1', weight: 1 },
      { provider: 'a', model: 'm2', weight: 1 },
    ]);
    expect(routes.map((r) => r.id)).toEqual(['a/m2', 'a/m1']);
  });

  it('draws a weighted policy by weight, the others following as fallbacks', () => {
    const targets = [
      { provider: 'a', model: 'm1', weight: 1 },
      { provider: 'b', model: 'm1', weight: 3 },
    ];
    // x = r × total(4): below 1 picks a, from 1 to 4 picks b.
    expect(planRoutes(registry(() => 0.1), 'weighted', targets).map((r) => r.id)).toEqual(['a/m1', 'b/m1']);
    expect(planRoutes(registry(() => 0.5), 'weighted', targets).map((r) => r.id)).toEqual(['b/m1', 'a/m1']);
    let seed = 42;
    const lcg = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    const r = registry(lcg);
    let firstB = 0;
    for (let i = 0; i < 4000; i++) if (planRoutes(r, 'weighted', targets)[0]!.id === 'b/m1') firstB++;
    expect(firstB / 4000).toBeGreaterThan(0.7);
    expect(firstB / 4000).toBeLessThan(0.8);
  });

  it('skips targets that are no longer configured', () => {
    expect(planRoutes(registry(), 'ordered', [{ provider: 'gone', model: 'm1', weight: 1 }, { provider: 'b', model: 'm1', weight: 1 }]).map((r) => r.id)).toEqual(['b/m1']);
  });
});

describe('CircuitBreaker', () => {
  it('opens at the threshold, lets exactly one probe through after the cool-down, closes on success', () => {
    const clock = new FakeClock(0);
    const cb = new CircuitBreaker(3, 1000, clock);
    cb.onFailure();
    cb.onFailure();
    expect(cb.current).toBe('closed');
    cb.onFailure();
    expect(cb.current).toBe('open');
    expect(cb.tryAcquire()).toBe(false);
    clock.advance(1000);
    expect(cb.tryAcquire()).toBe(true);
    expect(cb.tryAcquire()).toBe(false); // one probe at a time
    cb.onSuccess();
    expect(cb.current).toBe('closed');
    expect(cb.tryAcquire()).toBe(true);
  });

  it('re-opens for another cool-down when the probe fails, and frees the probe slot on release', () => {
    const clock = new FakeClock(0);
    const cb = new CircuitBreaker(1, 1000, clock);
    cb.onFailure();
    clock.advance(1000);
    expect(cb.tryAcquire()).toBe(true);
    cb.onFailure();
    expect(cb.current).toBe('open');
    clock.advance(999);
    expect(cb.tryAcquire()).toBe(false);
    clock.advance(1);
    expect(cb.tryAcquire()).toBe(true);
    cb.release();
    expect(cb.tryAcquire()).toBe(true);
  });
});

describe('sseData', () => {
  async function* chunks(...parts: string[]) {
    for (const p of parts) yield new TextEncoder().encode(p);
  }
  const all = async (it: AsyncIterable<string>) => {
    const out: string[] = [];
    for await (const x of it) out.push(x);
    return out;
  };

  it('joins events split across chunks, CRLF included, and ignores comments', async () => {
    expect(await all(sseData(chunks('data: {"a":', '1}\r', '\n\r\n: keep-alive\n\ndata: [DO', 'NE]\n\n')))).toEqual(['{"a":1}', '[DONE]']);
  });

  it('joins multi-line data and keeps a trailing event without a blank line', async () => {
    expect(await all(sseData(chunks('event: x\ndata: one\ndata: two\n\ndata: last')))).toEqual(['one\ntwo', 'last']);
  });
});

describe('MemoryResponseCache', () => {
  it('expires entries on the injected clock', async () => {
    const clock = new FakeClock(0);
    const cache = new MemoryResponseCache(clock);
    const answer = { model: 'm', route: 'p/m', region: 'eu', content: 'x', finishReason: 'stop' };
    await cache.set('prj_1', 'k', answer, 60);
    expect((await cache.get('prj_1', 'k')).status).toBe('hit');
    expect((await cache.get('prj_2', 'k')).status).toBe('miss');
    clock.advance(60_000);
    expect((await cache.get('prj_1', 'k')).status).toBe('miss');
  });

  it('evicts the oldest entry beyond its bound', async () => {
    const cache = new MemoryResponseCache(new FakeClock(0), 2);
    const answer = { model: 'm', route: 'p/m', region: 'eu', content: 'x', finishReason: 'stop' };
    await cache.set('p', 'a', answer, 60);
    await cache.set('p', 'b', answer, 60);
    await cache.set('p', 'c', answer, 60);
    expect((await cache.get('p', 'a')).status).toBe('miss');
    expect((await cache.get('p', 'c')).status).toBe('hit');
  });
});

describe('provider transport errors', () => {
  it('call a provider that does not answer in time a timeout, and one that cannot be connected to a connection error', () => {
    expect(transportError(new undiciErrors.HeadersTimeoutError(), 'p').kind).toBe('timeout');
    expect(transportError(new undiciErrors.BodyTimeoutError(), 'p').kind).toBe('timeout');
    // CONTRACT §8: connection errors fall back, and end in 503 model_unavailable, not 408.
    expect(transportError(new undiciErrors.ConnectTimeoutError(), 'p').kind).toBe('connection');
    expect(transportError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'p').kind).toBe('connection');
  });

  it('redact the provider key and credential-shaped strings from error text', () => {
    expect(redactCredentials('echo: my-own-provider-key-123 and Bearer abc.def and sk-live-0123456789', 'my-own-provider-key-123')).toBe(
      'echo: [redacted] and Bearer [redacted] and [redacted]',
    );
    expect(redactCredentials('plain message, key_name too short', null)).toBe('plain message, key_name too short');
  });
});
