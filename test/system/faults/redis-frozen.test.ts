import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../../helpers/app.ts';
import { expectError } from '../../helpers/expect.ts';
import { startMockOpenAI, type MockOpenAI } from '../../helpers/mock-openai.ts';
import { NO_SERVICES, NO_SERVICES_REASON, PrivateRedis } from '../../helpers/private-services.ts';
import { user, writeProvidersFile } from '../../inference/fixtures.ts';

/** The gateway's Redis command timeout here (SVC_REDIS_COMMAND_TIMEOUT_MS). */
const COMMAND_TIMEOUT_MS = 500;

/**
 * One gateway in process on a private Redis that the test freezes (SIGSTOP: socket open, nothing answers): what each
 * request does once Redis is known not to answer. The load test (redis-outage.test.ts) covers the moment it freezes.
 */
describe.skipIf(NO_SERVICES)(NO_SERVICES ? `A frozen Redis, request by request (${NO_SERVICES_REASON})` : 'A frozen Redis, request by request', () => {
  let redis: PrivateRedis;
  let provider: MockOpenAI;
  let t: TestApp;
  let operator: Client;

  beforeAll(async () => {
    [redis, provider] = await Promise.all([PrivateRedis.start(), startMockOpenAI()]);
    const file = writeProvidersFile({
      providers: [
        { name: 'p', kind: 'openai', base_url: provider.url, region: 'eu-west-1', timeout_ms: 5_000, models: [{ id: 'gpt-test', input_per_mtok: 1, output_per_mtok: 2 }] },
      ],
    });
    t = await buildTestApp({ env: { REDIS_URL: redis.url, SVC_REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS), SVC_PROVIDERS_FILE: file } });
    operator = client(t.app);
  }, 60_000);
  afterAll(async () => {
    redis?.unfreeze();
    await t?.close();
    await Promise.all([redis?.destroy(), provider?.close()]);
  });

  const readyz = () => operator.get('/readyz', { key: null });

  it('serves inference without waiting for it: uncached, per-replica limits, budgets from PostgreSQL, usage recorded', { timeout: 30_000 }, async () => {
    const a = await seedProject(operator);
    const b = await seedProject(operator);
    const apiA = client(t.app, a.secret);
    const apiB = client(t.app, b.secret);
    const cached = { project_id: a.projectId, model: 'gpt-test', messages: user('cached answer'), cache: true };
    expect((await apiA.post('/v1/inference', cached)).headers['x-svc-cache']).toBe('miss');
    expect((await apiA.post('/v1/inference', cached)).headers['x-svc-cache']).toBe('hit');
    // Project B spends past its budget ($0.001; one answer of 1,000 + 1,000 tokens costs $0.003) before the freeze.
    expect((await operator.put(`/v1/projects/${b.projectId}/budget`, { budget_usd: 0.001 })).status).toBe(200);
    const spend = { project_id: b.projectId, model: 'gpt-test', messages: user('x'.repeat(1_000)) };
    expect((await apiB.post('/v1/inference', spend)).status).toBe(200);
    expectError(await apiB.post('/v1/inference', spend), 429, 'budget_exceeded');
    expect((await operator.get(`/v1/projects/${b.projectId}/budget`)).body.spent_usd).toBeGreaterThanOrEqual(0.001);

    redis.freeze();
    try {
      await vi.waitFor(async () => expect((await readyz()).status).toBe(503), { timeout: 5_000, interval: 50 });
      expect((await readyz()).body.checks).toEqual({ database: 'ok', redis: 'unavailable', limits: 'degraded' });

      const calls = provider.calls;
      const timed = async <T>(call: () => Promise<T>) => {
        const started = performance.now();
        const res = await call();
        return { res, ms: performance.now() - started };
      };
      const uncached = await timed(() => apiA.post('/v1/inference', cached));
      expect(uncached.res.status).toBe(200);
      expect(uncached.res.headers['x-svc-cache']).toBe('unavailable');
      expect(uncached.res.body.cache_hit).toBe(false);
      expect(uncached.res.headers['x-svc-ratelimit-remaining']).toBeDefined();
      expect(provider.calls).toBe(calls + 1);
      const refused = await timed(() => apiB.post('/v1/inference', spend));
      expectError(refused.res, 429, 'budget_exceeded');
      expect(provider.calls).toBe(calls + 1);
      // Neither waited for a command timeout.
      expect({ uncached: uncached.ms < COMMAND_TIMEOUT_MS, refused: refused.ms < COMMAND_TIMEOUT_MS }).toEqual({ uncached: true, refused: true });
      // The usage record was written while Redis stayed frozen (directly to PostgreSQL, not through its stream).
      const record = await t.deps.db.usageRecord.findUnique({ where: { requestId: uncached.res.body.request_id } });
      expect(record).toMatchObject({ status: 'succeeded', cacheHit: false, projectId: a.projectId });
    } finally {
      redis.unfreeze();
    }
    await vi.waitFor(async () => expect((await readyz()).body.checks).toEqual({ database: 'ok', redis: 'ok', limits: 'ok' }), {
      timeout: 5_000,
      interval: 50,
    });
    // Back on Redis: its cache answers again.
    expect((await apiA.post('/v1/inference', cached)).headers['x-svc-cache']).toBe('hit');
  });
});
