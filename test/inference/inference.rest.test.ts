import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RedisResponseCache } from '../../src/redis/response-cache.ts';
import { buildTestApp, client, MASTER_KEY, seedProject, type Client, type TestApp, swapPiece } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { expectScopeRequired } from '../helpers/security.ts';
import { expectNoOutcome, expectOneOutcome, INFERENCE_KEYS, user, writeProvidersFile } from './fixtures.ts';

const PROVIDER_KEY = 'sk-provider-secret-value-0123456789';

let t: TestApp;
let operator: Client;
let api: Client;
let projectId: string;
let keyId: string;
let cheap: MockOpenAI;
let backup: MockOpenAI;
let us: MockOpenAI;

beforeAll(async () => {
  [cheap, backup, us] = await Promise.all([startMockOpenAI(), startMockOpenAI(), startMockOpenAI()]);
  const file = writeProvidersFile({
    providers: [
      {
        name: 'cheap',
        kind: 'openai',
        base_url: cheap.url,
        api_key_env: 'TEST_PROVIDER_KEY',
        region: 'eu-west-1',
        timeout_ms: 5000,
        models: [
          { id: 'gpt-test', input_per_mtok: 1.0, output_per_mtok: 2.0 },
          { id: 'gpt-frac', input_per_mtok: 0.15, output_per_mtok: 0.6 },
        ],
      },
      {
        name: 'backup',
        kind: 'openai',
        base_url: backup.url,
        region: 'eu-west-1',
        timeout_ms: 5000,
        models: [{ id: 'gpt-test', input_per_mtok: 3.0, output_per_mtok: 4.0 }],
      },
      {
        name: 'us',
        kind: 'openai',
        base_url: us.url,
        region: 'us-east-1',
        timeout_ms: 5000,
        models: [
          { id: 'gpt-test', input_per_mtok: 5.0, output_per_mtok: 5.0 },
          { id: 'gpt-us-only', input_per_mtok: 1.0, output_per_mtok: 1.0 },
        ],
      },
    ],
  });
  // A threshold no test here reaches: circuits are exercised in routing.fallback.test.ts.
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, TEST_PROVIDER_KEY: PROVIDER_KEY, SVC_CIRCUIT_FAILURES: '1000' } });
  operator = client(t.app);
  const seeded = await seedProject(operator, { plan: 'growth' });
  projectId = seeded.projectId;
  keyId = seeded.keyId;
  api = client(t.app, seeded.secret);
});
afterAll(async () => {
  await t.close();
  await Promise.all([cheap.close(), backup.close(), us.close()]);
});
beforeEach(() => {
  for (const m of [cheap, backup, us]) m.reset();
});

const infer = (body: Record<string, unknown>, opts?: Parameters<Client['post']>[2], as: Client = api) =>
  as.post('/v1/inference', { project_id: projectId, ...body }, opts);

describe('POST /v1/inference', () => {
  it('answers in the contract shape, costed from the price table to the micro-dollar', async () => {
    const res = await infer({ model: 'gpt-test', messages: [{ role: 'system', content: 'Be brief.' }, ...user('Hello world')] });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(INFERENCE_KEYS);
    // The mock reports prompt = 20 characters, completion = 11: 20 × $1 + 11 × $2 per million = 42 µ$.
    expect(res.body).toMatchObject({
      object: 'svc.inference',
      model: 'gpt-test',
      route: 'cheap/gpt-test',
      region: 'eu-west-1',
      cache_hit: false,
      message: { role: 'assistant', content: 'Hello world' },
      finish_reason: 'stop',
      usage: { prompt_tokens: 20, completion_tokens: 11, total_tokens: 31 },
      cost_usd: 0.000042,
      request_id: res.headers['x-svc-request-id'],
    });
    expect(res.body.id).toMatch(/^inf_/);
    expect(res.body.created_at).toBe(Math.floor(t.clock.now() / 1000));
    expect(res.headers['x-svc-cache']).toBeUndefined();

    expect(cheap.calls).toBe(1);
    expect(backup.calls + us.calls).toBe(0);
    const sent = cheap.requests[0]!;
    expect(sent.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    expect(sent.body).toMatchObject({ model: 'gpt-test', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello world' }] });

    const record = await expectOneOutcome(t, res.body.request_id, {
      status: 'succeeded',
      errorCode: null,
      route: 'cheap/gpt-test',
      region: 'eu-west-1',
      cacheHit: false,
      costMicros: 42n,
      promptTokens: 20,
      completionTokens: 11,
    });
    expect(record.keyId).toBe(keyId);
    expect(record.model).toBe('gpt-test');
  });

  it('rounds the cost once, half up, to the micro-dollar', async () => {
    cheap.set({ usage: { prompt_tokens: 1234, completion_tokens: 567 } });
    // 1234 × 0.15 + 567 × 0.60 = 185.1 + 340.2 = 525.3 µ$ → 525 µ$.
    const res = await infer({ model: 'gpt-frac', messages: user('price me') });
    expect(res.body.cost_usd).toBe(0.000525);
    cheap.set({ usage: { prompt_tokens: 3, completion_tokens: 1 } });
    // 3 × 0.15 + 1 × 0.60 = 1.05 µ$ → 1 µ$; and 0.45 + 0 → 0 µ$ would round down, 0.5 up.
    const small = await infer({ model: 'gpt-frac', messages: user('tiny') });
    expect(small.body.cost_usd).toBe(0.000001);
  });

  it('sends model auto to the cheapest provider', async () => {
    const res = await infer({ model: 'auto', messages: user('anything') });
    expect(res.status).toBe(200);
    // gpt-frac (0.75 per token pair) is cheaper than gpt-test at cheap (3.0).
    expect(res.body.route).toBe('cheap/gpt-frac');
  });

  it('passes max_tokens and temperature to the provider', async () => {
    await infer({ model: 'gpt-test', messages: user('x'), max_tokens: 7, temperature: 0.2 });
    expect(cheap.requests[0]!.body).toMatchObject({ max_tokens: 7, temperature: 0.2 });
  });

  it('never logs the provider key', async () => {
    await infer({ model: 'gpt-test', messages: user('log check') });
    expect(t.logs.text).not.toContain(PROVIDER_KEY);
  });

  it('never passes the provider key on when a provider echoes it in an error, nor logs it', async () => {
    // `cheap` echoes the Authorization header it got (the gateway's key for it), raw and after a label.
    cheap.set({ status: 400, errorMessage: (auth) => `bad request; auth ${auth}; key=${auth?.replace(/^Bearer /, '')}` });
    const rejected = await infer({ model: 'gpt-test', messages: user('echo') });
    expectError(rejected, 400, 'invalid_request');
    expect(rejected.body.error.message).toContain('auth Bearer [redacted]; key=[redacted]');
    expect(rejected.raw).not.toContain(PROVIDER_KEY);
    cheap.set({ status: 500, errorMessage: (auth) => `upstream broke; key=${auth?.replace(/^Bearer /, '')}` });
    await infer({ model: 'gpt-test', messages: user('echo 500') });
    // An error event in the middle of a stream is logged ("provider failed mid-stream") redacted too.
    cheap.set({ streamError: (auth) => `stream broke; key=${auth?.replace(/^Bearer /, '')}` });
    const streamed = await infer({ model: 'gpt-test', messages: user('echo stream'), stream: true });
    expect(streamed.raw).toContain('event: error');
    expect(t.logs.text).toContain('stream broke; key=[redacted]');
    expect(t.logs.text).not.toContain(PROVIDER_KEY);
  });
});

describe('validation', () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['empty messages', { model: 'gpt-test', messages: [] }, 'messages'],
    ['messages not an array', { model: 'gpt-test', messages: 'hi' }, 'messages'],
    ['a bad role', { model: 'gpt-test', messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role'],
    ['a tool message without tool_call_id', { model: 'gpt-test', messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id'],
    ['tool_calls on a user message', { model: 'gpt-test', messages: [{ role: 'user', content: 'x', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }] }, 'messages[0].tool_calls'],
    ['a tool without a name', { model: 'gpt-test', messages: user('x'), tools: [{ type: 'function', function: {} }] }, 'tools[0].function.name'],
    ['a tool_choice naming no tool', { model: 'gpt-test', messages: user('x'), tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } }, 'tool_choice'],
    ['a json_schema format without a name', { model: 'gpt-test', messages: user('x'), response_format: { type: 'json_schema', json_schema: { schema: {} } } }, 'response_format.json_schema.name'],
    ['top_logprobs without logprobs', { model: 'gpt-test', messages: user('x'), top_logprobs: 2 }, 'top_logprobs'],
    ['content not a string', { model: 'gpt-test', messages: [...user('ok'), { role: 'user', content: 5 }] }, 'messages[1].content'],
    ['a message that is not an object', { model: 'gpt-test', messages: ['hi'] }, 'messages[0]'],
    ['an unknown message field', { model: 'gpt-test', messages: [{ role: 'user', content: 'x', nickname: 'n' }] }, 'messages[0].nickname'],
    ['an unknown model', { model: 'gpt-nope', messages: user('x') }, 'model'],
    ['a missing model', { messages: user('x') }, 'model'],
    ['max_tokens 0', { model: 'gpt-test', messages: user('x'), max_tokens: 0 }, 'max_tokens'],
    ['temperature 3', { model: 'gpt-test', messages: user('x'), temperature: 3 }, 'temperature'],
    ['cache as text', { model: 'gpt-test', messages: user('x'), cache: 'yes' }, 'cache'],
    ['cache TTL 0', { model: 'gpt-test', messages: user('x'), cache: 0 }, 'cache'],
    ['a bad region', { model: 'gpt-test', messages: user('x'), region: 'EU WEST' }, 'region'],
    ['metadata values that are not strings', { model: 'gpt-test', messages: user('x'), metadata: { a: 1 } }, 'metadata.a'],
    ['an empty tools array', { model: 'gpt-test', messages: user('x'), tools: [] }, 'tools'],
    ['an unknown field', { model: 'gpt-test', messages: user('x'), functions: [] }, 'functions'],
  ];
  for (const [what, body, param] of cases) {
    it(`refuses ${what}: 400 invalid_request, param ${param}, nothing recorded`, async () => {
      const res = await infer(body);
      expectError(res, 400, 'invalid_request', param);
      await expectNoOutcome(t, res.body.error.request_id);
      expect(cheap.calls).toBe(0);
    });
  }

  it('answers 400 missing_project_id without project_id or X-Svc-Project', async () => {
    const res = await api.post('/v1/inference', { model: 'gpt-test', messages: user('x') });
    expectError(res, 400, 'missing_project_id', 'project_id');
  });

  it('takes the project from X-Svc-Project', async () => {
    const res = await api.post('/v1/inference', { model: 'gpt-test', messages: user('x') }, { headers: { 'x-svc-project': projectId } });
    expect(res.status).toBe(200);
  });

  it("answers 404 for another project's id, never reaching a provider", async () => {
    const other = await seedProject(operator);
    const res = await infer({ model: 'gpt-test', project_id: other.projectId, messages: user('x') });
    expectError(res, 404, 'not_found');
    expect(cheap.calls).toBe(0);
  });

  it('needs inference:write', async () => {
    const weak = await seedProject(operator, { scopes: ['usage:read'] });
    await expectScopeRequired(client(t.app, weak.secret), [
      { method: 'post', url: '/v1/inference', body: { model: 'gpt-test', project_id: weak.projectId, messages: user('x') } },
    ]);
  });
});

describe('project state and residency', () => {
  it('answers 403 project_archived for an archived project, and records it', async () => {
    const p = await seedProject(operator);
    await operator.post(`/v1/projects/${p.projectId}/archive`);
    const res = await client(t.app, p.secret).post('/v1/inference', { model: 'gpt-test', project_id: p.projectId, messages: user('x') });
    expectError(res, 403, 'project_archived');
    expect(cheap.calls).toBe(0);
    await expectOneOutcome(t, res.body.error.request_id, { status: 'failed', errorCode: 'project_archived', route: null, costMicros: 0n });
  });

  it('routes a pinned project only to providers of its region', async () => {
    const eu = await seedProject(operator, { region: 'eu-west-1' });
    const euApi = client(t.app, eu.secret);
    const res = await euApi.post('/v1/inference', { model: 'auto', project_id: eu.projectId, messages: user('x') });
    expect(res.status).toBe(200);
    expect(res.body.region).toBe('eu-west-1');
    // Even when the only provider of the pinned region fails, it never falls back across the border.
    cheap.set({ status: 500 });
    backup.set({ status: 500 });
    const failing = await euApi.post('/v1/inference', { model: 'gpt-test', project_id: eu.projectId, messages: user('x') });
    expectError(failing, 503, 'model_unavailable');
    expect(us.calls).toBe(0);
    await expectOneOutcome(t, failing.body.error.request_id, { status: 'failed', errorCode: 'model_unavailable', route: 'backup/gpt-test', region: 'eu-west-1' });
  });

  it('answers 403 residency_violation when the request names another region than the pin', async () => {
    const eu = await seedProject(operator, { region: 'eu-west-1' });
    const res = await client(t.app, eu.secret).post('/v1/inference', {
      model: 'gpt-test',
      project_id: eu.projectId,
      messages: user('x'),
      region: 'us-east-1',
    });
    expectError(res, 403, 'residency_violation', 'region');
    expect(cheap.calls + backup.calls + us.calls).toBe(0);
    await expectOneOutcome(t, res.body.error.request_id, { status: 'failed', errorCode: 'residency_violation', route: null, region: 'eu-west-1' });
  });

  it('accepts the pinned region named in the request', async () => {
    const eu = await seedProject(operator, { region: 'eu-west-1' });
    const res = await client(t.app, eu.secret).post('/v1/inference', {
      model: 'gpt-test',
      project_id: eu.projectId,
      messages: user('x'),
      region: 'eu-west-1',
    });
    expect(res.status).toBe(200);
  });

  it('answers 503 model_unavailable when the model is not served in the pinned region', async () => {
    const eu = await seedProject(operator, { region: 'eu-west-1' });
    const res = await client(t.app, eu.secret).post('/v1/inference', { model: 'gpt-us-only', project_id: eu.projectId, messages: user('x') });
    expectError(res, 503, 'model_unavailable');
    expect(us.calls).toBe(0);
    await expectOneOutcome(t, res.body.error.request_id, { status: 'failed', errorCode: 'model_unavailable', route: null });
  });

  it('routes an unpinned request that names a region to that region', async () => {
    const res = await infer({ model: 'gpt-test', messages: user('x'), region: 'us-east-1' });
    expect(res.body.route).toBe('us/gpt-test');
    expect(res.body.region).toBe('us-east-1');
  });
});

describe('Idempotency-Key', () => {
  it('calls the provider once and charges once for a retried request', async () => {
    const body = { model: 'gpt-test', messages: user('idempotent') };
    const first = await infer(body, { headers: { 'idempotency-key': 'inf-1' } });
    const second = await infer(body, { headers: { 'idempotency-key': 'inf-1' } });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(cheap.calls).toBe(1);
    await expectNoOutcome(t, second.headers['x-svc-request-id'] as string);
    await expectOneOutcome(t, first.body.request_id, { status: 'succeeded' });
  });

  it('calls the provider once when both arrive at once', async () => {
    cheap.set({ delayMs: 300 });
    const body = { model: 'gpt-test', messages: user('at once') };
    const spendBefore = await spent();
    const [a, b] = await Promise.all([
      infer(body, { headers: { 'idempotency-key': 'inf-race' } }),
      infer(body, { headers: { 'idempotency-key': 'inf-race' } }),
    ]);
    expect(cheap.calls).toBe(1);
    const ok = [a, b].filter((r) => r.status === 200);
    const refused = [a, b].filter((r) => r.status === 409);
    expect(ok.length + refused.length).toBe(2);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const r of refused) expectError(r, 409, 'idempotency_conflict');
    await t.deps.outcomes.flush();
    const records = await t.deps.db.usageRecord.count({ where: { requestId: { in: [a, b].map((r) => r.headers['x-svc-request-id'] as string) } } });
    expect(records).toBe(1);
    // 'at once' is 7 characters: 7 × $1 + 7 × $2 per million = 21 µ$, charged once.
    expect((await spent()) - spendBefore).toBe(21n);
  });

  it('answers 409 idempotency_conflict for the same key with another body', async () => {
    await infer({ model: 'gpt-test', messages: user('one') }, { headers: { 'idempotency-key': 'inf-2' } });
    const res = await infer({ model: 'gpt-test', messages: user('two') }, { headers: { 'idempotency-key': 'inf-2' } });
    expectError(res, 409, 'idempotency_conflict');
    expect(cheap.calls).toBe(1);
  });
});

async function spent(): Promise<bigint> {
  await t.deps.outcomes.flush();
  const rows = await t.deps.db.budgetSpend.findMany({ where: { scope: `project:${projectId}` } });
  return rows.reduce((n, r) => n + r.spentMicros, 0n);
}

describe('response cache', () => {
  it('serves an identical cached request from the cache: one request, zero tokens, zero cost', async () => {
    const body = { model: 'gpt-test', messages: user('cache me'), cache: true };
    const first = await infer(body);
    expect(first.status).toBe(200);
    expect(first.body.cache_hit).toBe(false);
    expect(first.headers['x-svc-cache']).toBe('miss');
    const second = await infer(body);
    expect(second.status).toBe(200);
    expect(second.headers['x-svc-cache']).toBe('hit');
    expect(second.body).toMatchObject({
      cache_hit: true,
      route: 'cheap/gpt-test',
      region: 'eu-west-1',
      message: first.body.message,
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
      cost_usd: 0,
    });
    expect(second.body.id).not.toBe(first.body.id);
    expect(cheap.calls).toBe(1);
    await expectOneOutcome(t, first.body.request_id, { status: 'succeeded', cacheHit: false, costMicros: 24n });
    await expectOneOutcome(t, second.body.request_id, {
      status: 'succeeded',
      cacheHit: true,
      costMicros: 0n,
      promptTokens: 0,
      completionTokens: 0,
      route: 'cheap/gpt-test',
    });
  });

  it('matches exactly: another message, model or max_tokens is a miss', async () => {
    await infer({ model: 'gpt-test', messages: user('exact'), cache: 60 });
    const other = await infer({ model: 'gpt-test', messages: user('exact!'), cache: 60 });
    const limited = await infer({ model: 'gpt-test', messages: user('exact'), cache: 60, max_tokens: 5 });
    expect([other.body.cache_hit, limited.body.cache_hit]).toEqual([false, false]);
    expect(cheap.calls).toBe(3);
  });

  it('does not cache unless asked, and cache: false never reads it', async () => {
    await infer({ model: 'gpt-test', messages: user('uncached') });
    await infer({ model: 'gpt-test', messages: user('uncached') });
    await infer({ model: 'gpt-test', messages: user('cached once'), cache: true });
    const bypass = await infer({ model: 'gpt-test', messages: user('cached once'), cache: false });
    expect(bypass.body.cache_hit).toBe(false);
    expect(bypass.headers['x-svc-cache']).toBeUndefined();
    expect(cheap.calls).toBe(4);
  });

  it('keeps one project out of another project\'s cache', async () => {
    const other = await seedProject(operator);
    await infer({ model: 'gpt-test', messages: user('tenant cache'), cache: true });
    const res = await client(t.app, other.secret).post('/v1/inference', {
      model: 'gpt-test',
      project_id: other.projectId,
      messages: user('tenant cache'),
      cache: true,
    });
    expect(res.body.cache_hit).toBe(false);
    expect(cheap.calls).toBe(2);
  });

  it('serves a hit even when the token window is exhausted (a hit takes zero tokens)', async () => {
    const p = await seedProject(operator);
    const pApi = client(t.app, p.secret);
    const limits = await operator.put(`/v1/projects/${p.projectId}/rate-limits`, {
      requests_per_minute: 100,
      tokens_per_minute: 1000,
      burst: 0,
    });
    expect(limits.status).toBe(200);
    const body = { model: 'gpt-test', project_id: p.projectId, messages: user('window'), cache: true, max_tokens: 10 };
    expect((await pApi.post('/v1/inference', body)).status).toBe(200);
    // An answer far over the estimate leaves the token window in debt.
    cheap.set({ usage: { prompt_tokens: 10, completion_tokens: 5000 } });
    expect((await pApi.post('/v1/inference', { ...body, messages: user('expensive'), cache: false })).status).toBe(200);
    const hit = await pApi.post('/v1/inference', body);
    expect(hit.status).toBe(200);
    expect(hit.body.cache_hit).toBe(true);
    const refused = await pApi.post('/v1/inference', { ...body, messages: user('not cached') });
    expectError(refused, 429, 'rate_limit_exceeded');
    expect(refused.headers['retry-after']).toBeDefined();
    expect(cheap.calls).toBe(2);
    await expectOneOutcome(t, refused.body.error.request_id, { status: 'failed', errorCode: 'rate_limit_exceeded', route: null });
  });

  it('goes on uncached when the cache store is down, and says so in X-Svc-Cache', async () => {
    const original = t.deps.responseCache;
    // A Redis that is not there: nothing listens on port 1.
    const dead = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    swapPiece(t.deps, 'responseCache', new RedisResponseCache(dead, 'dead:'));
    try {
      const body = { model: 'gpt-test', messages: user('redis down'), cache: true };
      const first = await infer(body);
      const second = await infer(body);
      for (const r of [first, second]) {
        expect(r.status).toBe(200);
        expect(r.body.cache_hit).toBe(false);
        expect(r.headers['x-svc-cache']).toBe('unavailable');
      }
      expect(cheap.calls).toBe(2);
    } finally {
      swapPiece(t.deps, 'responseCache', original);
      dead.disconnect();
    }
  });
});

describe('budget', () => {
  it('answers 429 budget_exceeded once the month is spent, and records it', async () => {
    const p = await seedProject(operator);
    const pApi = client(t.app, p.secret);
    const budget = await operator.put(`/v1/projects/${p.projectId}/budget`, { budget_usd: 0.0001 });
    expect(budget.status).toBe(200);
    cheap.set({ usage: { prompt_tokens: 100, completion_tokens: 100 } }); // 300 µ$ > 100 µ$
    expect((await pApi.post('/v1/inference', { model: 'gpt-test', project_id: p.projectId, messages: user('spend') })).status).toBe(200);
    const res = await pApi.post('/v1/inference', { model: 'gpt-test', project_id: p.projectId, messages: user('more') });
    expectError(res, 429, 'budget_exceeded');
    expect(cheap.calls).toBe(1);
    await expectOneOutcome(t, res.body.error.request_id, { status: 'failed', errorCode: 'budget_exceeded', route: null });
  });
});

describe('operator', () => {
  it('runs inference for a project it names, recorded under key_master', async () => {
    const res = await operator.post('/v1/inference', { model: 'gpt-test', project_id: projectId, messages: user('op') });
    expect(res.status).toBe(200);
    expect(res.headers['x-svc-project']).toBe(projectId);
    const record = await expectOneOutcome(t, res.body.request_id, { status: 'succeeded' });
    expect(record.keyId).toBe('key_master');
  });
});

export { MASTER_KEY };
