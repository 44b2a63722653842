import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emitDailyUsageSummaries } from '../../src/jobs/daily-summary/daily-summary.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { USAGE_RECORD_KEYS, user, writeProvidersFile } from '../inference/fixtures.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  // A priced in-process mock: prompt = Σ(1 + ⌈chars/4⌉) tokens, completion = ⌈chars/4⌉ of the echo.
  const file = writeProvidersFile({
    providers: [
      { name: 'priced', kind: 'mock', region: 'eu-west-1', models: [{ id: 'mock-priced', input_per_mtok: 1, output_per_mtok: 2 }] },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  operator = client(t.app);
});
afterAll(() => t.close());

async function project() {
  const seeded = await seedProject(operator, { plan: 'growth', scopes: ['inference:write', 'usage:read'] });
  return { ...seeded, api: client(t.app, seeded.secret) };
}

/** "abcd": prompt 2 tokens, completion 1 token: 2 × $1 + 1 × $2 per million = 4 µ$. */
const infer = (p: { api: Client; projectId: string }, content = 'abcd', extra: Record<string, unknown> = {}) =>
  p.api.post('/v1/inference', { model: 'mock-priced', project_id: p.projectId, messages: user(content), ...extra });

describe('GET /v1/usage?granularity=request', () => {
  it('lists usage records newest first, in the contract shape', async () => {
    const p = await project();
    const ok = await infer(p);
    expect(ok.status).toBe(200);
    const failed = await infer(p, 'abcd', { region: 'us-east-1' }); // no provider there
    expectError(failed, 503, 'model_unavailable');
    const res = await p.api.get('/v1/usage');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'list', has_more: false, url: '/v1/usage' });
    expect(res.headers['x-svc-page-limit']).toBe('20');
    expect(res.body.data).toHaveLength(2);
    for (const r of res.body.data) expect(Object.keys(r).sort()).toEqual(USAGE_RECORD_KEYS);
    expect(res.body.data[0]).toEqual({
      request_id: failed.body.error.request_id,
      object: 'svc.usage_record',
      project_id: p.projectId,
      key_id: p.keyId,
      model: 'mock-priced',
      route: null,
      region: 'us-east-1',
      cache_hit: false,
      status: 'failed',
      error_code: 'model_unavailable',
      prompt_tokens: 0,
      completion_tokens: 0,
      cost_usd: 0,
      latency_ms: expect.any(Number),
      created_at: Math.floor(t.clock.now() / 1000),
    });
    expect(res.body.data[1]).toMatchObject({
      request_id: ok.body.request_id,
      route: 'priced/mock-priced',
      region: 'eu-west-1',
      status: 'succeeded',
      error_code: null,
      prompt_tokens: 2,
      completion_tokens: 1,
      cost_usd: 0.000004,
    });
  });

  it('pages with request_id cursors', async () => {
    const p = await project();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await infer(p)).body.request_id);
    const page1 = await p.api.get('/v1/usage', { query: { granularity: 'request', limit: 2 } });
    expect(page1.body.data.map((r: any) => r.request_id)).toEqual([ids[2], ids[1]]);
    expect(page1.body.has_more).toBe(true);
    expect(page1.headers['x-svc-has-more']).toBe('true');
    const page2 = await p.api.get('/v1/usage', { query: { limit: 2, starting_after: ids[1]! } });
    expect(page2.body.data.map((r: any) => r.request_id)).toEqual([ids[0]]);
    expect(page2.body.has_more).toBe(false);
    const back = await p.api.get('/v1/usage', { query: { limit: 2, ending_before: ids[0]! } });
    expect(back.body.data.map((r: any) => r.request_id)).toEqual([ids[2], ids[1]]);
    expectError(await p.api.get('/v1/usage', { query: { starting_after: 'req_unknown' } }), 400, 'invalid_request', 'starting_after');
    expectError(await p.api.get('/v1/usage', { query: { limit: 101 } }), 400, 'invalid_request', 'limit');
  });

  it("shows a key only its own project's usage; the operator sees a project it names", async () => {
    const a = await project();
    const b = await project();
    await infer(a);
    await infer(b);
    const mine = await a.api.get('/v1/usage');
    expect(mine.body.data.every((r: any) => r.project_id === a.projectId)).toBe(true);
    await expectHiddenFrom(a.api, [{ method: 'get', url: `/v1/usage?project_id=${b.projectId}` }]);
    const forB = await operator.get('/v1/usage', { query: { project_id: b.projectId } });
    expect(forB.body.data.map((r: any) => r.project_id)).toEqual([b.projectId]);
  });

  it('needs usage:read', async () => {
    const weak = await seedProject(operator, { scopes: ['inference:write'] });
    await expectScopeRequired(client(t.app, weak.secret), [{ method: 'get', url: '/v1/usage' }]);
  });

  it('refuses an unknown granularity or a malformed date', async () => {
    const p = await project();
    expectError(await p.api.get('/v1/usage', { query: { granularity: 'hour' } }), 400, 'invalid_request', 'granularity');
    expectError(await p.api.get('/v1/usage', { query: { start_date: '2024-13-01' } }), 400, 'invalid_request', 'start_date');
    // PostgreSQL has no year 0: refused before any query, never a 500.
    expectError(await p.api.get('/v1/usage', { query: { start_date: '0000-01-01' } }), 400, 'invalid_request', 'start_date');
    expectError(await p.api.get('/v1/usage', { query: { granularity: 'day', end_date: '0001-01-01' } }), 400, 'invalid_request', 'end_date');
    expectError(await p.api.get('/v1/usage', { query: { foo: 'x' } }), 400, 'invalid_request', 'foo');
  });
});

describe('GET /v1/usage?granularity=day', () => {
  it('sums requests, tokens and cost per UTC day, newest first', async () => {
    const p = await project();
    const saved = t.clock.ms;
    try {
      t.clock.ms = Date.parse('2031-03-10T23:30:00Z');
      await infer(p);
      await infer(p, 'abcdefgh'); // prompt 3, completion 2: 3 + 4 = 7 µ$
      t.clock.ms = Date.parse('2031-03-11T00:30:00Z');
      await infer(p);
      await infer(p, 'abcd', { region: 'us-east-1' }); // failed: counted as a request, no tokens
      const res = await p.api.get('/v1/usage', { query: { granularity: 'day' } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ object: 'list', has_more: false, url: '/v1/usage' });
      expect(res.body.data).toEqual([
        { object: 'svc.usage_day', date: '2031-03-11', requests: 2, prompt_tokens: 2, completion_tokens: 1, cost_usd: 0.000004 },
        { object: 'svc.usage_day', date: '2031-03-10', requests: 2, prompt_tokens: 5, completion_tokens: 3, cost_usd: 0.000011 },
      ]);
      const one = await p.api.get('/v1/usage', { query: { granularity: 'day', start_date: '2031-03-10', end_date: '2031-03-10' } });
      expect(one.body.data.map((d: any) => d.date)).toEqual(['2031-03-10']);
    } finally {
      t.clock.ms = saved;
    }
  });

  it('refuses pagination parameters, which apply only to granularity=request, and over-long ranges', async () => {
    const p = await project();
    expectError(await p.api.get('/v1/usage', { query: { granularity: 'day', limit: 5 } }), 400, 'invalid_request', 'limit');
    expectError(
      await p.api.get('/v1/usage', { query: { granularity: 'day', start_date: '2020-01-01', end_date: '2022-01-01' } }),
      400,
      'invalid_request',
      'start_date',
    );
    expectError(
      await p.api.get('/v1/usage', { query: { granularity: 'day', start_date: '2022-01-02', end_date: '2022-01-01' } }),
      400,
      'invalid_request',
      'end_date',
    );
  });
});

describe('usage.daily_summary', () => {
  it('emits one summary per project with usage, once per day, after the day has ended', async () => {
    const a = await project();
    const b = await project();
    const idle = await project();
    const saved = t.clock.ms;
    try {
      t.clock.ms = Date.parse('2032-06-01T12:00:00Z');
      await infer(a);
      await infer(a, 'abcdefgh');
      await infer(a, 'abcd', { region: 'us-east-1' });
      await infer(b);
      const summaries = () => t.deps.db.event.findMany({ where: { type: 'usage.daily_summary', projectId: { in: [a.projectId, b.projectId, idle.projectId] } } });

      // Not while the day is running, nor in the grace period just after midnight.
      expect(await emitDailyUsageSummaries(t.deps, Date.parse('2032-06-01T23:59:00Z'))).toBe(0);
      expect(await emitDailyUsageSummaries(t.deps, Date.parse('2032-06-02T00:10:00Z'))).toBe(0);
      expect(await summaries()).toHaveLength(0);

      t.clock.ms = Date.parse('2032-06-02T00:20:00Z');
      expect(await emitDailyUsageSummaries(t.deps)).toBeGreaterThanOrEqual(2);
      const events = await summaries();
      expect(events).toHaveLength(2);
      const forA = events.find((e) => e.projectId === a.projectId)!;
      expect(forA.data).toEqual({
        project_id: a.projectId,
        date: '2032-06-01',
        requests: 3,
        succeeded: 2,
        failed: 1,
        prompt_tokens: 5,
        completion_tokens: 3,
        cost_usd: 0.000011,
      });
      expect(events.find((e) => e.projectId === b.projectId)!.data).toMatchObject({ requests: 1, cost_usd: 0.000004 });

      // Once: later runs that day (or on another replica) emit nothing more.
      expect(await emitDailyUsageSummaries(t.deps, Date.parse('2032-06-02T05:00:00Z'))).toBe(0);
      expect(await summaries()).toHaveLength(2);
    } finally {
      t.clock.ms = saved;
    }
  });
});
