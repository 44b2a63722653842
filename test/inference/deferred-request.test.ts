import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { FakeClock } from '../helpers/clock.ts';
import { expectError } from '../helpers/expect.ts';

/**
 * Inference takes its request from the request windows together with its token reservation (one Redis round trip
 * before the provider call). Whatever way a request leaves, it counts exactly once, and an exhausted request window
 * answers 429 before anything else is looked at, as when the request was taken first.
 */
let t: TestApp;
let operator: Client;

beforeAll(async () => {
  // A fake clock that does not move: no window refills while a test counts.
  t = await buildTestApp({ clock: new FakeClock(Date.UTC(2026, 10, 23, 12, 0, 0)) });
  operator = client(t.app);
});
afterAll(() => t.close());

type Res = Awaited<ReturnType<Client['post']>>;
const remaining = (res: Res) => Number(res.headers['x-svc-ratelimit-remaining']);
const ask = (projectId: string, extra: Record<string, unknown> = {}) => ({
  model: 'mock-1',
  project_id: projectId,
  messages: [{ role: 'user', content: 'hello' }],
  ...extra,
});

async function projectWithRequests(rpm: number) {
  const seeded = await seedProject(operator, { scopes: ['inference:write'] });
  const limits = { requests_per_minute: rpm, tokens_per_minute: 100_000_000, burst: 0 };
  expect((await operator.put(`/v1/projects/${seeded.projectId}/rate-limits`, limits)).status).toBe(200);
  return { ...seeded, api: client(t.app, seeded.secret) };
}

describe('the request an inference takes from the request windows', () => {
  it('is taken once whether the inference succeeds, is served from the cache, is refused as invalid or is replayed', async () => {
    const { projectId, api } = await projectWithRequests(50);
    const answers: Res[] = [];
    answers.push(await api.post('/v1/inference', ask(projectId)));
    answers.push(await api.post('/v1/inference', ask(projectId, { cache: true })));
    answers.push(await api.post('/v1/inference', ask(projectId, { cache: true })));
    answers.push(await api.post('/v1/inference', ask(projectId, { messages: [{ role: 'robot', content: 'x' }] })));
    answers.push(await api.post('/v1/inference', ask(projectId, { temperature: 'hot' })));
    answers.push(await api.post('/v1/inference', ask(projectId), { headers: { 'Idempotency-Key': 'once' } }));
    answers.push(await api.post('/v1/inference', ask(projectId), { headers: { 'Idempotency-Key': 'once' } }));
    answers.push(await api.post('/v1/chat/completions', { model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'X-Svc-Project': projectId } }));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 400, 400, 200, 200, 200]);
    expect(answers[2]!.body.cache_hit).toBe(true);
    expect(answers[6]!.headers['idempotent-replayed']).toBe('true');
    // 50 per minute, a clock that stands still: each answer one request less, the window binding throughout.
    expect(answers.map(remaining)).toEqual([49, 48, 47, 46, 45, 44, 43, 42]);
    expect(answers.every((a) => a.headers['x-svc-ratelimit-resource'] === 'requests')).toBe(true);
  });

  it('answers 429 from an exhausted request window before the body, the model or the budget is looked at', async () => {
    const { projectId, api } = await projectWithRequests(2);
    for (let i = 0; i < 2; i++) expect((await api.post('/v1/inference', ask(projectId))).status).toBe(200);
    const refusals = [
      await api.post('/v1/inference', ask(projectId)),
      await api.post('/v1/inference', ask(projectId, { cache: true })),
      await api.post('/v1/inference', ask(projectId, { messages: 'not a list' })),
      await api.post('/v1/inference', ask(projectId, { model: 'no-such-model' })),
      await api.post('/v1/inference', '{"model": ', { headers: { 'content-type': 'application/json' } }),
      await api.post('/v1/chat/completions', { model: 'mock-1', messages: [] }, { headers: { 'X-Svc-Project': projectId } }),
    ];
    for (const res of refusals) {
      expectError(res, 429, 'rate_limit_exceeded', null);
      expect(res.headers['x-svc-ratelimit-resource']).toBe('requests');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
    // Refused requests record no usage: only the two that passed did.
    await t.deps.outcomes.flush();
    expect(await t.deps.db.usageRecord.count({ where: { projectId } })).toBe(2);
  });

  it('is counted on a 403 insufficient_scope too, without an inference', async () => {
    const seeded = await seedProject(operator, { scopes: ['usage:read'] });
    const limits = { requests_per_minute: 5, tokens_per_minute: 1_000, burst: 0 };
    expect((await operator.put(`/v1/projects/${seeded.projectId}/rate-limits`, limits)).status).toBe(200);
    const api = client(t.app, seeded.secret);
    const denied = await api.post('/v1/inference', ask(seeded.projectId));
    expectError(denied, 403, 'insufficient_scope', null);
    expect(remaining(denied)).toBe(4);
  });
});
