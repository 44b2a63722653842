import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimateTokens } from '../../src/limits/index.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/clock.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { REDIS_URL } from '../helpers/services.ts';
import { standInInference } from './stand-in.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  // A quarter past a whole second, so that "the second at which a retry passes" is a rounding that can be wrong.
  t = await buildTestApp({ clock: new FakeClock(Date.UTC(2026, 10, 22, 12, 0, 0, 250)), beforeReady: standInInference });
  operator = client(t.app);
});
afterAll(() => t.close());

type Res = Awaited<ReturnType<Client['get']>>;
const rl = (res: Res) => ({
  limit: res.headers['x-svc-ratelimit-limit'] === undefined ? undefined : Number(res.headers['x-svc-ratelimit-limit']),
  remaining: res.headers['x-svc-ratelimit-remaining'] === undefined ? undefined : Number(res.headers['x-svc-ratelimit-remaining']),
  reset: res.headers['x-svc-ratelimit-reset'] === undefined ? undefined : Number(res.headers['x-svc-ratelimit-reset']),
  resource: res.headers['x-svc-ratelimit-resource'],
});
/** The Unix second at which a window that is `used` (whole units) over its refill rate is full again. */
const fullAt = (used: number, perMinute: number) => Math.ceil((t.clock.now() + Math.ceil((used * 60_000) / perMinute)) / 1000);

async function setLimits(projectId: string, rpm: number, tpm: number, burst: number) {
  const res = await operator.put(`/v1/projects/${projectId}/rate-limits`, { requests_per_minute: rpm, tokens_per_minute: tpm, burst });
  expect(res.status).toBe(200);
  return res;
}

const chat = (maxTokens?: number, extra: Record<string, unknown> = {}) => ({
  messages: [{ role: 'user', content: 'Say hello to the gateway.' }],
  ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
  ...extra,
});

describe('X-Svc-RateLimit-* headers', () => {
  it('describe the request window on success, counting down from the plan default', async () => {
    const { projectId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    for (let i = 1; i <= 3; i++) {
      const res = await api.get(`/v1/projects/${projectId}`);
      expect(res.status).toBe(200);
      // starter: 60 requests/min, burst 0; i requests used refill in i seconds.
      expect(rl(res)).toEqual({ limit: 60, remaining: 60 - i, reset: fullAt(i, 60), resource: 'requests' });
    }
  });

  it('are on a 403 insufficient_scope, which counts like any authenticated request', async () => {
    const { projectId } = await seedProject(operator);
    const key = await operator.post('/v1/keys', { project_id: projectId, name: 'reader', scopes: ['usage:read'] });
    const api = client(t.app, key.body.secret);
    const denied = await api.get(`/v1/projects/${projectId}/rate-limits`);
    expectError(denied, 403, 'insufficient_scope');
    expect(rl(denied)).toEqual({ limit: 60, remaining: 59, reset: fullAt(1, 60), resource: 'requests' });
    expect(denied.headers['retry-after']).toBeUndefined();
    const next = await api.get(`/v1/projects/${projectId}`);
    expect(rl(next).remaining).toBe(58);
  });

  it('are absent on a 401 (no valid key, so no window) and on public routes', async () => {
    const res = await client(t.app, 'svc_sk_not_a_real_key_000000000000000000000000').get('/v1/keys');
    expectError(res, 401, 'invalid_api_key');
    expect(Object.keys(res.headers).filter((h) => h.startsWith('x-svc-ratelimit'))).toEqual([]);
    const health = await operator.get('/healthz', { key: null });
    expect(health.headers['x-svc-ratelimit-limit']).toBeUndefined();
  });

  it('on 429 add Retry-After, and Reset is the second at which a retry passes', async () => {
    const { projectId, secret } = await seedProject(operator);
    await setLimits(projectId, 2, 100_000, 1);
    const api = client(t.app, secret);
    for (let i = 0; i < 3; i++) expect((await api.get(`/v1/projects/${projectId}`)).status).toBe(200);

    const refused = await api.get(`/v1/projects/${projectId}`);
    expectError(refused, 429, 'rate_limit_exceeded', null);
    expect(refused.body.error.message).toMatch(/requests window/);
    // Full at 3 of 3; one more request at 2/min needs 30 s.
    const retryAt = t.clock.now() + 30_000;
    const reset = Math.ceil(retryAt / 1000);
    expect(rl(refused)).toEqual({ limit: 3, remaining: 0, reset, resource: 'requests' });
    expect(Number(refused.headers['retry-after'])).toBe(Math.ceil((reset * 1000 - t.clock.now()) / 1000));

    // Refusals take nothing: the retry time does not move.
    const again = await api.get(`/v1/projects/${projectId}`);
    expect(rl(again).reset).toBe(reset);

    const start = t.clock.now();
    t.clock.ms = retryAt - 1;
    expect((await api.get(`/v1/projects/${projectId}`)).status).toBe(429);
    t.clock.ms = reset * 1000;
    const passed = await api.get(`/v1/projects/${projectId}`);
    expect(passed.status).toBe(200);
    expect(passed.headers['retry-after']).toBeUndefined();
    t.clock.ms = start;
  });

  it('are on GraphQL responses too, which take from the same windows', async () => {
    const { projectId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    await api.get(`/v1/projects/${projectId}`);
    const res = await api.post('/graphql', { query: '{ __typename }' });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ __typename: 'Query' });
    expect(rl(res)).toEqual({ limit: 60, remaining: 58, reset: fullAt(2, 60), resource: 'requests' });
  });

  it('give the operator key its own window (it belongs to no project)', async () => {
    const res = await operator.get('/v1/projects');
    expect(res.status).toBe(200);
    expect(rl(res)).toMatchObject({ limit: 6000, resource: 'requests' });
    expect(rl(res).remaining).toBeLessThan(6000);
  });

  it("count the operator's inference on a project against that project's request and token windows", async () => {
    const { projectId, secret } = await seedProject(operator);
    await setLimits(projectId, 3, 100_000, 0);
    const infer = (body: Record<string, unknown> = {}) =>
      operator.post('/v1/inference', { project_id: projectId, model: 'auto', messages: [{ role: 'user', content: 'hi' }], ...body });
    const first = await infer();
    expect(first.status).toBe(200);
    expect(rl(first)).toMatchObject({ limit: 3, remaining: 2, resource: 'requests' });
    expect((await infer()).status).toBe(200);
    expect((await infer()).status).toBe(200);
    const refused = await infer();
    expectError(refused, 429, 'rate_limit_exceeded');
    expect(refused.body.error.message).toMatch(/project's requests window/);
    expect(rl(refused)).toMatchObject({ limit: 3, remaining: 0, resource: 'requests' });
    // The project's own keys find the window the operator emptied.
    expectError(await client(t.app, secret).get(`/v1/projects/${projectId}`), 429, 'rate_limit_exceeded');

    // Tokens: the operator's inference uses 201 tokens (the mock echoes 400 characters) of a 100-token window, which
    // it leaves in debt: the project's key is then refused by the token window.
    const other = await seedProject(operator);
    await setLimits(other.projectId, 100, 100, 0);
    const long = [{ role: 'user', content: 'x'.repeat(400) }];
    const big = await operator.post('/v1/inference', { project_id: other.projectId, model: 'auto', messages: long });
    expect(big.status).toBe(200);
    expect(big.body.usage).toMatchObject({ prompt_tokens: 101, completion_tokens: 100 });
    const starved = await client(t.app, other.secret).post('/v1/inference', { project_id: other.projectId, model: 'auto', messages: [{ role: 'user', content: 'hi' }] });
    expectError(starved, 429, 'rate_limit_exceeded');
    expect(rl(starved)).toMatchObject({ limit: 100, remaining: 0, resource: 'tokens' });
  });

  it("refuse every key of a project once the project's window is empty", async () => {
    const { projectId, secret } = await seedProject(operator);
    await setLimits(projectId, 3, 100_000, 0);
    const other = await operator.post('/v1/keys', { project_id: projectId, name: 'second', scopes: ['usage:read'] });
    for (let i = 0; i < 3; i++) expect((await client(t.app, secret).get(`/v1/projects/${projectId}`)).status).toBe(200);
    const res = await client(t.app, other.body.secret).get(`/v1/projects/${projectId}`);
    expectError(res, 429, 'rate_limit_exceeded');
    expect(res.body.error.message).toMatch(/project's requests window/);
    expect(rl(res)).toMatchObject({ limit: 3, remaining: 0, resource: 'requests' });
  });

  it('describe the token window when it binds: after a reservation, on later requests, and after settling', async () => {
    const { projectId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    const e1 = estimateTokens(chat(6000).messages, 6000);
    const first = await api.post('/test/inference', chat(6000));
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ estimate: e1, reserved: e1 });
    // 1 of 60 requests used (98% left) against e1 of 100,000 tokens (95% left): tokens bind.
    expect(rl(first)).toEqual({ limit: 100_000, remaining: 100_000 - e1, reset: fullAt(e1, 100_000), resource: 'tokens' });

    // A plain REST call takes no tokens, but the token window still binds.
    const rest = await api.get(`/v1/projects/${projectId}`);
    expect(rl(rest)).toEqual({ limit: 100_000, remaining: 100_000 - e1, reset: fullAt(e1, 100_000), resource: 'tokens' });

    // A cache hit reserves, then settles to 0: the window is back where it was.
    const hit = await api.post('/test/inference', chat(6000, { usage_tokens: 0 }));
    expect(rl(hit)).toEqual({ limit: 100_000, remaining: 100_000 - e1, reset: fullAt(e1, 100_000), resource: 'tokens' });

    // Settling the first kind of call to its real, small usage: requests bind again.
    const { secret: s2 } = await seedProject(operator);
    const small = await client(t.app, s2).post('/test/inference', chat(6000, { usage_tokens: 120 }));
    expect(rl(small)).toEqual({ limit: 60, remaining: 59, reset: fullAt(1, 60), resource: 'requests' });
  });

  it('answer 429 from the token window with its headers, and a retry at Reset passes', async () => {
    const { projectId, secret } = await seedProject(operator);
    await setLimits(projectId, 100, 1000, 0);
    const api = client(t.app, secret);
    // An estimate larger than the whole window takes the whole window.
    const big = await api.post('/test/inference', chat(2000));
    expect(big.status).toBe(200);
    expect(big.body.reserved).toBe(1000);
    expect(rl(big)).toEqual({ limit: 1000, remaining: 0, reset: fullAt(1000, 1000), resource: 'tokens' });

    const e2 = estimateTokens(chat(10).messages, 10);
    const refused = await api.post('/test/inference', chat(10));
    expectError(refused, 429, 'rate_limit_exceeded');
    expect(refused.body.error.message).toMatch(/tokens window/);
    const retryAt = t.clock.now() + Math.ceil((e2 * 60_000) / 1000);
    const reset = Math.ceil(retryAt / 1000);
    expect(rl(refused)).toEqual({ limit: 1000, remaining: 0, reset, resource: 'tokens' });
    expect(Number(refused.headers['retry-after'])).toBe(Math.ceil((reset * 1000 - t.clock.now()) / 1000));

    const start = t.clock.now();
    t.clock.ms = retryAt - 1;
    expect((await api.post('/test/inference', chat(10))).status).toBe(429);
    t.clock.ms = reset * 1000;
    expect((await api.post('/test/inference', chat(10))).status).toBe(200);
    t.clock.ms = start;
  });
});

describe('PUT /v1/projects/{project_id}/rate-limits', () => {
  it('sets the limits, audits and emits policy.updated, and GET reads them back', async () => {
    const { projectId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    const res = await api.put(`/v1/projects/${projectId}/rate-limits`, { requests_per_minute: 120, tokens_per_minute: 250_000, burst: 30 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      object: 'svc.rate_limits',
      project_id: projectId,
      requests_per_minute: 120,
      tokens_per_minute: 250_000,
      burst: 30,
      updated_at: Math.floor(t.clock.now() / 1000),
    });
    expect((await api.get(`/v1/projects/${projectId}/rate-limits`)).body).toEqual(res.body);

    const audit = await api.get('/v1/audit/events', { query: { action: 'policy.updated' } });
    expect(audit.body.data).toHaveLength(1);
    expect(audit.body.data[0]).toMatchObject({
      action: 'policy.updated',
      project_id: projectId,
      target_id: projectId,
      data: { policy: 'rate_limits', requests_per_minute: 120, tokens_per_minute: 250_000, burst: 30 },
    });
    const events = await t.deps.db.event.findMany({ where: { projectId, type: 'policy.updated' } });
    expect(events.map((e) => e.data)).toEqual([{ policy: 'rate_limits', requests_per_minute: 120, tokens_per_minute: 250_000, burst: 30 }]);
  });

  it('shows the plan defaults until set (enterprise: growth figures)', async () => {
    for (const [plan, rpm, tpm] of [
      ['starter', 60, 100_000],
      ['growth', 300, 500_000],
      ['enterprise', 300, 500_000],
    ] as const) {
      const { projectId } = await seedProject(operator, { plan });
      const res = await operator.get(`/v1/projects/${projectId}/rate-limits`);
      expect(res.body).toEqual({
        object: 'svc.rate_limits',
        project_id: projectId,
        requests_per_minute: rpm,
        tokens_per_minute: tpm,
        burst: 0,
        updated_at: null,
      });
      const { secret } = await seedProject(operator, { plan });
      expect(rl(await client(t.app, secret).get('/v1/projects')).limit).toBe(rpm);
    }
  });

  it('refuses bad values with 400 invalid_request naming the field', async () => {
    const { projectId } = await seedProject(operator);
    const good = { requests_per_minute: 10, tokens_per_minute: 1000, burst: 0 };
    const cases: [string, Record<string, unknown>, string][] = [
      ['missing rpm', { tokens_per_minute: 1000, burst: 0 }, 'requests_per_minute'],
      ['missing tpm', { requests_per_minute: 10, burst: 0 }, 'tokens_per_minute'],
      ['missing burst', { requests_per_minute: 10, tokens_per_minute: 1000 }, 'burst'],
      ['rpm 0', { ...good, requests_per_minute: 0 }, 'requests_per_minute'],
      ['rpm fraction', { ...good, requests_per_minute: 1.5 }, 'requests_per_minute'],
      ['rpm text', { ...good, requests_per_minute: '10' }, 'requests_per_minute'],
      ['rpm null', { ...good, requests_per_minute: null }, 'requests_per_minute'],
      ['tpm 0', { ...good, tokens_per_minute: 0 }, 'tokens_per_minute'],
      ['tpm too large', { ...good, tokens_per_minute: 2_147_483_648 }, 'tokens_per_minute'],
      ['burst negative', { ...good, burst: -1 }, 'burst'],
      ['burst fraction', { ...good, burst: 0.5 }, 'burst'],
      ['unknown field', { ...good, window: 60 }, 'window'],
    ];
    for (const [what, body, param] of cases) {
      const res = await operator.put(`/v1/projects/${projectId}/rate-limits`, body);
      expect({ what, status: res.status }).toEqual({ what, status: 400 });
      expectError(res, 400, 'invalid_request', param);
    }
    // Nothing was stored.
    expect((await operator.get(`/v1/projects/${projectId}/rate-limits`)).body.updated_at).toBeNull();
  });

  it('needs governance:manage (GET too), and another project looks absent', async () => {
    const mine = await seedProject(operator, { scopes: ['usage:read'] });
    await expectScopeRequired(client(t.app, mine.secret), [
      { method: 'put', url: `/v1/projects/${mine.projectId}/rate-limits`, body: { requests_per_minute: 1, tokens_per_minute: 1, burst: 0 } },
      { method: 'get', url: `/v1/projects/${mine.projectId}/rate-limits` },
    ]);
    const admin = await seedProject(operator);
    const theirs = await seedProject(operator);
    await expectHiddenFrom(client(t.app, admin.secret), [
      { method: 'put', url: `/v1/projects/${theirs.projectId}/rate-limits`, body: { requests_per_minute: 1, tokens_per_minute: 1, burst: 0 } },
      { method: 'get', url: `/v1/projects/${theirs.projectId}/rate-limits` },
    ]);
    await expectHiddenFrom(operator, [{ method: 'get', url: '/v1/projects/prj_00000000000000000000000000/rate-limits' }]);
    expect((await operator.get(`/v1/projects/${theirs.projectId}/rate-limits`)).body.updated_at).toBeNull();
  });

  it('takes effect on the next request, with fresh windows under the new limits', async () => {
    const { projectId, secret } = await seedProject(operator);
    const api = client(t.app, secret);
    for (let i = 0; i < 10; i++) await api.get(`/v1/projects/${projectId}`);
    // The key changes its own project's limits; that request still counted under the old ones.
    const put = await api.put(`/v1/projects/${projectId}/rate-limits`, { requests_per_minute: 5, tokens_per_minute: 1000, burst: 0 });
    expect(rl(put)).toMatchObject({ limit: 60, remaining: 49 });
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await api.get(`/v1/projects/${projectId}`)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  });

  it('takes effect on the next request on another replica', async () => {
    const { projectId, secret } = await seedProject(operator);
    const second = await buildTestApp({
      database: { database: t.deps.database, url: t.config.databaseUrl, drop: async () => {} },
      clock: t.clock,
      redisPrefix: t.config.redisPrefix,
    });
    try {
      const onSecond = client(second.app, secret);
      // The second replica has read (and cached) the plan defaults.
      expect(rl(await onSecond.get(`/v1/projects/${projectId}`)).limit).toBe(60);
      await setLimits(projectId, 7, 1000, 2);
      const next = await onSecond.get(`/v1/projects/${projectId}`);
      expect(rl(next)).toMatchObject({ limit: 9, remaining: 8, resource: 'requests' });
    } finally {
      await second.close();
    }
  });
});

describe('concurrency', () => {
  const hammer = async (targets: Client[], projectId: string, total: number) => {
    const results = await Promise.all(
      Array.from({ length: total }, (_, i) => targets[i % targets.length]!.get(`/v1/projects/${projectId}`)),
    );
    return results;
  };

  it(`lets exactly 60 of 200 concurrent requests pass with rpm 50 and burst 10 (${REDIS_URL ? 'Redis' : 'in-process'} store)`, async () => {
    const { projectId, secret } = await seedProject(operator);
    await setLimits(projectId, 50, 100_000, 10);
    const results = await hammer([client(t.app, secret)], projectId, 200);
    expect(results.filter((r) => r.status === 200)).toHaveLength(60);
    const refused = results.filter((r) => r.status === 429);
    expect(refused).toHaveLength(140);
    for (const r of refused) {
      expect(r.body.error.code).toBe('rate_limit_exceeded');
      expect(rl(r)).toEqual({ limit: 60, remaining: 0, reset: fullAt(1, 50), resource: 'requests' });
    }
    const remaining = results.filter((r) => r.status === 200).map((r) => rl(r).remaining).sort((a, b) => a! - b!);
    expect(remaining).toEqual(Array.from({ length: 60 }, (_, i) => i));
  });

  it.skipIf(!REDIS_URL)('lets exactly 60 of 200 concurrent requests pass across two app instances sharing Redis', async () => {
    const { projectId, secret } = await seedProject(operator);
    await setLimits(projectId, 50, 100_000, 10);
    const second = await buildTestApp({
      database: { database: t.deps.database, url: t.config.databaseUrl, drop: async () => {} },
      clock: t.clock,
      redisPrefix: t.config.redisPrefix,
    });
    try {
      expect(second.deps.limiter.kind).toBe('redis');
      const results = await hammer([client(t.app, secret), client(second.app, secret)], projectId, 200);
      expect(results.filter((r) => r.status === 200)).toHaveLength(60);
      expect(results.filter((r) => r.status === 429)).toHaveLength(140);
      const remaining = results.filter((r) => r.status === 200).map((r) => rl(r).remaining).sort((a, b) => a! - b!);
      expect(remaining).toEqual(Array.from({ length: 60 }, (_, i) => i));
    } finally {
      await second.close();
    }
  });
});

describe('idempotent replays (issue 14)', () => {
  it.each([
    ['/v1/inference', (projectId: string) => ({ project_id: projectId, model: 'auto', messages: [{ role: 'user', content: 'hi' }] })],
    ['/v1/chat/completions', () => ({ model: 'auto', messages: [{ role: 'user', content: 'hi' }] })],
  ])('on %s take a request: with the window exhausted a replay is 429, not the stored answer', async (route, bodyOf) => {
    const { projectId, secret } = await seedProject(operator);
    await setLimits(projectId, 3, 100_000, 0);
    const api = client(t.app, secret);
    const body = bodyOf(projectId);
    const idem = { headers: { 'idempotency-key': `replay-${route}` } };
    const first = await api.post(route, body, idem);
    expect(first.status, first.raw).toBe(200);
    expect(rl(first)).toMatchObject({ limit: 3, remaining: 2, resource: 'requests' });

    const replay = await api.post(route, body, idem);
    expect(replay.status).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect(rl(replay)).toMatchObject({ limit: 3, remaining: 1, resource: 'requests' });

    expect((await api.post(route, body, idem)).headers['idempotent-replayed']).toBe('true'); // the third request
    const refused = [];
    for (let i = 0; i < 20; i++) refused.push(await api.post(route, body, idem));
    for (const res of refused) {
      expectError(res, 429, 'rate_limit_exceeded', null);
      expect(res.headers['idempotent-replayed']).toBeUndefined();
      expect(res.raw).not.toContain(first.body.id);
      // Reset: the second at which one more request passes (3/min: one request refills in 20 s).
      expect(rl(res)).toEqual({ limit: 3, remaining: 0, reset: fullAt(1, 3), resource: 'requests' });
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
    // A different body with the same Idempotency-Key is refused by the window first too.
    expectError(await api.post(route, { ...body, max_tokens: 5 }, idem), 429, 'rate_limit_exceeded', null);
    // Once the window refills, the replay is served again (the stored answer was kept).
    const start = t.clock.now();
    t.clock.ms = fullAt(1, 3) * 1000;
    const later = await api.post(route, body, idem);
    expect(later.headers['idempotent-replayed']).toBe('true');
    expect(later.body).toEqual(first.body);
    t.clock.ms = start;
  });
});
