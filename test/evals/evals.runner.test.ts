import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrismaIdempotencyStore, SealedIdempotencyStore } from '../../src/domain/idempotency/store.ts';
import { RedisIdempotencyStore } from '../../src/redis/idempotency-store.ts';
import { caseRequestId } from '../../src/jobs/eval-runner/runner.ts';
import { buildTestApp, client, type Client, type TestApp, swapPiece } from '../helpers/app.ts';
import { startReceiver, type Receiver } from '../helpers/https-receiver.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';
import { createWebhook, testWorker, webhookEnv } from '../webhooks/support.ts';
import { pollUntil } from '../helpers/gateway-process.ts';
import { EvalRunner } from '../../src/jobs/eval-runner/runner.ts';
import { allResults, evalProject, testRunner, userCase } from './support.ts';

let t: TestApp;
let operator: Client;
let provider: MockOpenAI;
const receivers: Receiver[] = [];

beforeAll(async () => {
  provider = await startMockOpenAI();
  const file = writeProvidersFile({
    providers: [
      {
        name: 'priced',
        kind: 'openai',
        base_url: provider.url,
        region: 'eu-west-1',
        timeout_ms: 5000,
        // 1 $ per million tokens each way: every case costs a little.
        models: [{ id: 'gpt-test', input_per_mtok: 1.0, output_per_mtok: 1.0 }],
      },
    ],
  });
  t = await buildTestApp({ env: { ...webhookEnv(), SVC_PROVIDERS_FILE: file, SVC_OUTCOME_LEASE_MS: '500' } });
  operator = client(t.app);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t?.close();
  await provider?.close();
});

const cases = (n: number, prefix = 'q') =>
  Array.from({ length: n }, (_, i) => userCase(`${prefix}${i} ok`, { type: 'contains', value: 'ok' }, { id: `${prefix}${i}` }));

async function create(api: Client, projectId: string, body: Record<string, unknown>) {
  const res = await api.post('/v1/evals', { project_id: projectId, name: 'run', model: 'gpt-test', ...body });
  expect(res.status, res.raw).toBe(200);
  return res.body as { id: string };
}

describe('the runner', () => {
  it('delivers eval.run.completed {eval_id, status, passed, failed, errored, cost_usd} to a webhook receiver', async () => {
    provider.reset({ usage: { prompt_tokens: 100, completion_tokens: 50 } });
    const r = await startReceiver();
    receivers.push(r);
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    r.secret = (await createWebhook(api, { project_id: s.projectId, url: r.url, events: ['eval.run.completed'] })).secret;
    const run = await create(api, s.projectId, {
      cases: [...cases(3), userCase('nope', { type: 'exact', value: 'yes' }, { id: 'miss' })],
      concurrency: 2,
    });
    await testRunner(t).runPending();
    const worker = testWorker(t);
    await worker.runDue();
    await worker.stop();
    await r.waitFor(1);
    expect(r.receipts[0]!.verifyError).toBeNull();
    // 4 cases × 150 tokens × 1 $/M = 600 µ$
    expect(r.receipts.map((x) => ({ type: x.event!.type, data: x.event!.data }))).toEqual([
      { type: 'eval.run.completed', data: { eval_id: run.id, status: 'completed', passed: 3, failed: 1, errored: 0, cost_usd: 0.0006 } },
    ]);
    const got = await api.get(`/v1/evals/${run.id}`);
    expect(got.body.summary).toMatchObject({ total: 4, passed: 3, failed: 1, errored: 0, pass_rate: 0.75, cost_usd: 0.0006 });
    // Each case went through the inference pipeline as the creating key: one usage record each, under that key.
    const usage = await api.get('/v1/usage', { query: { granularity: 'request', project_id: s.projectId, limit: 100 } });
    const results = await allResults(api, run.id);
    const ids = new Set(results.map((x) => x.request_id));
    const records = usage.body.data.filter((u: any) => ids.has(u.request_id));
    expect(records).toHaveLength(4);
    expect(records.every((u: any) => u.key_id === s.keyId && u.status === 'succeeded' && u.cost_usd === 0.00015)).toBe(true);
  });

  it('waits out a 429 rate_limit_exceeded (Retry-After, on the injected clock) and completes every case', async () => {
    provider.reset();
    const s = await evalProject(operator, { limits: { requests_per_minute: 3, tokens_per_minute: 1_000_000, burst: 0 } });
    const api = client(t.app, s.secret);
    const run = await create(api, s.projectId, { cases: cases(6), concurrency: 1 });
    const waits: number[] = [];
    await testRunner(t, waits).runPending();
    expect(waits.length).toBeGreaterThan(0);
    expect(waits.every((ms) => ms >= 1000 && ms <= 60_000)).toBe(true);
    // The key's own window is spent by the run: read as the operator.
    const got = await operator.get(`/v1/evals/${run.id}`);
    expect(got.body).toMatchObject({ status: 'completed', summary: { total: 6, passed: 6, failed: 0, errored: 0 } });
    const results = await allResults(operator, run.id);
    expect(results.some((x) => x.attempts > 1)).toBe(true);
  });

  it('stops at budget_exceeded: the remaining cases errored, the run failed', async () => {
    // 150 tokens a case = 150 µ$; a budget of 300 µ$ lets two cases through.
    provider.reset({ usage: { prompt_tokens: 100, completion_tokens: 50 } });
    const s = await evalProject(operator, { budgetUsd: 0.0003 });
    const api = client(t.app, s.secret);
    const run = await create(api, s.projectId, { cases: cases(6), concurrency: 1 });
    await testRunner(t).runPending();
    const got = await api.get(`/v1/evals/${run.id}`);
    expect(got.body).toMatchObject({
      status: 'failed',
      summary: { total: 6, passed: 2, failed: 0, errored: 4, cost_usd: 0.0003 },
      error: { code: 'budget_exceeded' },
    });
    const results = await allResults(api, run.id);
    expect(results.map((x) => x.status)).toEqual(['passed', 'passed', 'errored', 'errored', 'errored', 'errored']);
    expect(results[2].reason).toMatch(/^budget_exceeded/);
    expect(provider.calls).toBe(2);
  });

  it('fails the run when the creating key was revoked', async () => {
    provider.reset();
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const run = await create(api, s.projectId, { cases: cases(2) });
    expect((await operator.post(`/v1/keys/${s.keyId}/revoke`)).status).toBe(200);
    await testRunner(t).runPending();
    const got = await operator.get(`/v1/evals/${run.id}`);
    expect(got.body).toMatchObject({ status: 'failed', error: { code: 'invalid_api_key' }, summary: { errored: 2 } });
    expect(provider.calls).toBe(0);
  });

  it('cancel stops the run: no case runs after it, the rest are skipped, and eval.run.completed says canceled', async () => {
    provider.reset();
    const r = await startReceiver();
    receivers.push(r);
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    r.secret = (await createWebhook(api, { project_id: s.projectId, url: r.url, events: ['eval.run.completed'] })).secret;
    const run = await create(api, s.projectId, { cases: cases(8), concurrency: 1 });
    // Cancel from inside the third provider call: that case still gets its result, nothing after it runs.
    let calls = 0;
    provider.set({ delayMs: 0 });
    const runner = testRunner(t);
    const origin = t.deps.providers;
    const cancelOnThird = new Proxy(origin, {
      get(target, prop, receiver) {
        if (prop === 'complete') {
          return async (...args: unknown[]) => {
            if (++calls === 3) {
              const c = await api.post(`/v1/evals/${run.id}/cancel`);
              expect(c.status, c.raw).toBe(200);
              expect(c.body.status).toBe('canceled');
            }
            return (target.complete as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return Reflect.get(target, prop, receiver);
      },
    });
    swapPiece(t.deps, 'providers', cancelOnThird);
    try {
      await runner.runPending();
    } finally {
      swapPiece(t.deps, 'providers', origin);
    }
    expect(calls).toBe(3);
    const got = await api.get(`/v1/evals/${run.id}`);
    expect(got.body).toMatchObject({ status: 'canceled', summary: { total: 8, passed: 3, failed: 0, errored: 0 } });
    expect(got.body.completed_at).toEqual(expect.any(Number));
    const results = await allResults(api, run.id);
    expect(results.map((x) => x.status)).toEqual(['passed', 'passed', 'passed', 'skipped', 'skipped', 'skipped', 'skipped', 'skipped']);
    // Canceling again returns the same run; the audit trail has eval_run.create and eval_run.cancel.
    const again = await api.post(`/v1/evals/${run.id}/cancel`);
    expect(again.body.status).toBe('canceled');
    const audit = await operator.get('/v1/audit/events', { query: { project_id: s.projectId } });
    const actions = audit.body.data.map((a: any) => a.action);
    expect(actions.filter((a: string) => a === 'eval_run.cancel')).toHaveLength(1);
    expect(actions).toContain('eval_run.create');
    const worker = testWorker(t);
    await worker.runDue();
    await worker.stop();
    await r.waitFor(1);
    expect(r.receipts.map((x) => x.event!.data)).toEqual([{ eval_id: run.id, status: 'canceled', passed: 2, failed: 0, errored: 0, cost_usd: expect.any(Number) }]);
  });

  it('refuses to cancel a completed run (400) and runs nothing twice on a second pass', async () => {
    provider.reset();
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const run = await create(api, s.projectId, { cases: cases(2) });
    await testRunner(t).runPending();
    expect(await testRunner(t).runPending()).toBe(0);
    expect(provider.calls).toBe(2);
    const res = await api.post(`/v1/evals/${run.id}/cancel`);
    expect({ status: res.status, code: res.body.error.code, param: res.body.error.param }).toEqual({ status: 400, code: 'invalid_request', param: 'eval_id' });
  });

  it('when started, picks queued runs up by itself, several at once, and stops cleanly', async () => {
    provider.reset({ delayMs: 30 });
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const runs = [await create(api, s.projectId, { cases: cases(3), concurrency: 1 }), await create(api, s.projectId, { cases: cases(3), concurrency: 1 })];
    const runner = new EvalRunner(t.deps, { pollMs: 20, maxRuns: 2 });
    runner.start();
    try {
      await pollUntil('both runs completed', async () => {
        const states = await Promise.all(runs.map(async (r) => (await operator.get(`/v1/evals/${r.id}`)).body.status));
        return states.every((x) => x === 'completed');
      }, 20_000, 100);
    } finally {
      await runner.stop();
    }
    expect(provider.calls).toBe(6);
  });

  describe('resuming a case a stopped worker had begun', () => {
    /** The state a worker killed during case 0's call leaves: the case started, its call's Idempotency-Key running. */
    async function leaveStarted(charged: boolean) {
      provider.reset({ usage: { prompt_tokens: 10, completion_tokens: 10 } });
      const s = await evalProject(operator);
      const api = client(t.app, s.secret);
      const run = await create(api, s.projectId, { cases: cases(2), concurrency: 1 });
      const requestId = caseRequestId(run.id, 0, 'main', 1);
      const row = await t.deps.db.evalCase.findFirstOrThrow({ where: { runId: run.id, index: 0 } });
      await t.deps.db.evalCase.update({ where: { id: row.id }, data: { status: 'started', attempts: 1, requestId } });
      const d = t.deps;
      const store = new SealedIdempotencyStore(d.redis ? new RedisIdempotencyStore(d.redis, d.config.redisPrefix) : new PrismaIdempotencyStore(d.db), d.webhooks.secretBox);
      expect((await store.begin(s.projectId, `svc-eval:${run.id}:0:main`, 'dead-worker', t.clock.now())).kind).toBe('started');
      if (charged) {
        await d.db.usageRecord.create({
          data: { requestId, projectId: s.projectId, keyId: s.keyId, model: 'gpt-test', status: 'succeeded', promptTokens: 10, completionTokens: 10, costMicros: 20n, createdAt: new Date(t.clock.now()) },
        });
      }
      return { s, api, run, prefix: requestId.slice(0, 26) };
    }

    it('does not call again a call that was charged: the case is errored as interrupted', async () => {
      const { s, api, run, prefix } = await leaveStarted(true);
      await testRunner(t).runPending();
      const results = await allResults(api, run.id);
      expect(results.map((x) => x.status)).toEqual(['errored', 'passed']);
      expect(results[0].reason).toMatch(/^interrupted: .*charged once/);
      expect(provider.calls).toBe(1);
      const usage = await operator.get('/v1/usage', { query: { granularity: 'request', project_id: s.projectId, limit: 100 } });
      expect(usage.body.data.filter((u: any) => u.request_id.startsWith(prefix))).toHaveLength(1);
      expect((await api.get(`/v1/evals/${run.id}`)).body).toMatchObject({ status: 'completed', summary: { passed: 1, errored: 1 } });
    });

    it('makes a call again that left no usage record (cut off before the provider answered), once', async () => {
      const { s, api, run, prefix } = await leaveStarted(false);
      await testRunner(t).runPending();
      const results = await allResults(api, run.id);
      expect(results.map((x) => x.status)).toEqual(['passed', 'passed']);
      expect(results[0]).toMatchObject({ attempts: 2, request_id: caseRequestId(run.id, 0, 'main', 2) });
      expect(provider.calls).toBe(2);
      const usage = await operator.get('/v1/usage', { query: { granularity: 'request', project_id: s.projectId, limit: 100 } });
      expect(usage.body.data.filter((u: any) => u.request_id.startsWith(prefix) && u.status === 'succeeded')).toHaveLength(1);
    });
  });
});
