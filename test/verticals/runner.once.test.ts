import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PrismaIdempotencyStore, SealedIdempotencyStore, type IdempotencyStore } from '../../src/domain/idempotency/store.ts';
import { RedisIdempotencyStore } from '../../src/redis/idempotency-store.ts';
import { jobCallKey } from '../../src/domain/verticals/runner.ts';
import { VerticalWorker } from '../../src/jobs/vertical-work/worker.ts';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';
import { verticalProject } from './support.ts';

/**
 * A worker that dies between the model's answer and the job's commit (domain/inference/once.ts): the injected fault
 * is the idempotency store's `complete`, which stops the worker for good (a promise that never settles, as a killed
 * process's work never goes on) either just before the answer is stored or just after. Another worker then resumes
 * the job once its lease has run out: one provider call and one charge per job, whatever the moment of death.
 */

let t: TestApp;
let operator: Client;
let wire: MockOpenAI;

const LEASE_MS = 60_000;
/** A valid risk.assessment answer, with a marker to look for where no content may be stored. */
const MARKER = 'answer-marker-7f3c';
const ANSWER = JSON.stringify({ summary: MARKER, likelihood: 'low', impact: 'medium', risks: [], recommendations: ['none'] });

beforeAll(async () => {
  wire = await startMockOpenAI();
  const file = writeProvidersFile({
    providers: [{ name: 'wire', kind: 'openai', base_url: wire.url, region: 'local', timeout_ms: 5000, models: [{ id: 'wire-1', input_per_mtok: 1, output_per_mtok: 2 }] }],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  operator = client(t.app);
});
afterAll(async () => {
  await t.close();
  await wire.close();
});
beforeEach(() => wire.reset({ content: ANSWER, usage: { prompt_tokens: 10, completion_tokens: 10 } }));

const realStore = (): IdempotencyStore =>
  new SealedIdempotencyStore(
    t.deps.redis ? new RedisIdempotencyStore(t.deps.redis, t.deps.config.redisPrefix) : new PrismaIdempotencyStore(t.deps.db),
    t.deps.webhooks.secretBox,
  );

/**
 * The idempotency store of a worker that dies in `complete`, before or after the answer is stored. `reached` resolves
 * when it dies; `revive()` lets the dead worker go on (a stalled worker, not a dead one) to show it cannot commit over
 * the one that took its job over.
 */
function dyingStore(when: 'before-store' | 'after-store') {
  const inner = realStore();
  let reached!: () => void;
  let revive!: () => void;
  const reachedP = new Promise<void>((r) => (reached = r));
  const revived = new Promise<void>((r) => (revive = r));
  const store: IdempotencyStore = {
    begin: (...a) => inner.begin(...a),
    abandon: (...a) => inner.abandon(...a),
    complete: async (scope, key, status, body) => {
      if (when === 'after-store') await inner.complete(scope, key, status, body);
      reached();
      await revived;
      if (when === 'before-store') await inner.complete(scope, key, status, body);
    },
  };
  return { store, reached: reachedP, revive };
}

async function queuedAssessment(opts: { zero?: boolean } = {}) {
  const p = await verticalProject(operator, ['risk:write', 'risk:read', 'inference:write']);
  if (opts.zero) expect((await operator.put(`/v1/projects/${p.projectId}/retention`, { mode: 'zero' })).status).toBe(200);
  const api = client(t.app, p.secret);
  const c = await api.post('/v1/risk/cases', { title: 'c', assignee: 'a', reviewer: 'b' });
  const rsa = await api.post(`/v1/risk/cases/${c.body.id}/assessments`, {});
  expect(rsa.status, rsa.raw).toBe(200);
  const job = await t.deps.db.verticalJob.findFirstOrThrow({ where: { subjectId: rsa.body.id } });
  return { ...p, api, id: rsa.body.id as string, jobId: job.id };
}

/** The worker dies in `when`; the job's lease runs out; a healthy worker resumes it. Returns the dead worker's fate. */
async function dieThenResume(when: 'before-store' | 'after-store') {
  const dying = dyingStore(when);
  const dead = new VerticalWorker(t.deps, { leaseMs: LEASE_MS, idempotency: dying.store }).runDue();
  await dying.reached;
  expect(wire.requests).toHaveLength(1);
  // Nothing is due while the dead worker's lease holds.
  expect(await new VerticalWorker(t.deps, { leaseMs: LEASE_MS }).runDue()).toEqual([]);
  t.clock.advance(LEASE_MS);
  const resumed = await new VerticalWorker(t.deps, { leaseMs: LEASE_MS }).runDue();
  return { resumed, dying, dead };
}

async function succeededUsage(projectId: string) {
  await t.deps.outcomes.flush();
  const usage = await operator.get('/v1/usage', { query: { granularity: 'request', project_id: projectId, limit: 100 } });
  expect(usage.status, usage.raw).toBe(200);
  return usage.body.data.filter((u: any) => u.status === 'succeeded');
}

/** What the idempotency store holds for the job's call (its replay body), read as the worker would. */
async function storedCall(projectId: string, jobId: string) {
  const key = jobCallKey(jobId);
  const begun = await realStore().begin(projectId, key, createHash('sha256').update(key).digest('hex'), t.clock.now());
  expect(begun.kind).toBe('replay');
  return begun.kind === 'replay' ? begun.body : '';
}

describe('a worker that dies between the model answer and the commit', () => {
  it('after the answer was stored: the resumed job replays it, with one provider call and one charge', async () => {
    const a = await queuedAssessment();
    const { resumed, dying, dead } = await dieThenResume('after-store');
    expect(resumed).toEqual(['succeeded']);
    expect(wire.requests).toHaveLength(1);
    const done = (await a.api.get(`/v1/risk/assessments/${a.id}`)).body;
    expect(done).toMatchObject({ status: 'completed', content: { summary: MARKER } });
    const charged = await succeededUsage(a.projectId);
    expect(charged).toHaveLength(1);
    const job = await t.deps.db.verticalJob.findUniqueOrThrow({ where: { id: a.jobId } });
    expect(job).toMatchObject({ status: 'succeeded', attempts: 2, requestId: charged[0].request_id });
    expect(job.inferenceIds).toHaveLength(1);
    // The stalled worker, let go, finds its lease gone: it writes nothing and calls nothing.
    dying.revive();
    expect(await dead).toEqual(['lost']);
    expect(wire.requests).toHaveLength(1);
    expect(await t.deps.db.verticalJob.findUniqueOrThrow({ where: { id: a.jobId } })).toEqual(job);
  });

  it('before the answer was stored: the resumed job takes it from the retained inference, not from a second call', async () => {
    const a = await queuedAssessment();
    const { resumed, dying, dead } = await dieThenResume('before-store');
    expect(resumed).toEqual(['succeeded']);
    expect(wire.requests).toHaveLength(1);
    expect((await a.api.get(`/v1/risk/assessments/${a.id}`)).body).toMatchObject({ status: 'completed', content: { summary: MARKER } });
    const charged = await succeededUsage(a.projectId);
    expect(charged).toHaveLength(1);
    const job = await t.deps.db.verticalJob.findUniqueOrThrow({ where: { id: a.jobId } });
    const retained = await t.deps.db.retainedInference.findFirstOrThrow({ where: { requestId: charged[0].request_id } });
    expect(job.inferenceIds).toEqual([retained.id]);
    dying.revive();
    expect(await dead).toEqual(['lost']);
    expect(wire.requests).toHaveLength(1);
    expect(await succeededUsage(a.projectId)).toHaveLength(1);
  });

  it('zero retention, before the answer was stored: the job fails as interrupted, charged once, and no content is kept', async () => {
    const a = await queuedAssessment({ zero: true });
    const { resumed, dying, dead } = await dieThenResume('before-store');
    expect(resumed).toEqual(['failed']);
    expect(wire.requests).toHaveLength(1);
    const failed = (await a.api.get(`/v1/risk/assessments/${a.id}`)).body;
    expect(failed).toMatchObject({ status: 'failed', content: null, error: { code: 'internal_error', message: expect.stringMatching(/charged once and is not made again/) } });
    expect(await succeededUsage(a.projectId)).toHaveLength(1);
    const stored = await storedCall(a.projectId, a.jobId);
    expect(JSON.parse(stored)).toMatchObject({ ok: false, code: 'interrupted' });
    expect(stored).not.toContain(MARKER);
    expect(await t.deps.db.retainedInference.count({ where: { projectId: a.projectId, sealed: { not: null } } })).toBe(0);
    dying.revive();
    expect(await dead).toEqual(['lost']);
    expect(wire.requests).toHaveLength(1);
  });

  it('zero retention, after the answer was stored: the store kept only its figures, so the job fails as interrupted, charged once', async () => {
    const a = await queuedAssessment({ zero: true });
    const { resumed, dying, dead } = await dieThenResume('after-store');
    expect(resumed).toEqual(['failed']);
    expect(wire.requests).toHaveLength(1);
    expect((await a.api.get(`/v1/risk/assessments/${a.id}`)).body).toMatchObject({
      status: 'failed',
      error: { code: 'internal_error', message: expect.stringMatching(/zero retention.*charged once/) },
    });
    expect(await succeededUsage(a.projectId)).toHaveLength(1);
    const stored = await storedCall(a.projectId, a.jobId);
    expect(JSON.parse(stored)).toMatchObject({ ok: true, content: '', dropped: true, promptTokens: 10, completionTokens: 10 });
    expect(stored).not.toContain(MARKER);
    dying.revive();
    expect(await dead).toEqual(['lost']);
    expect(wire.requests).toHaveLength(1);
  });

  it('a job whose call failed at the provider (503) is tried again without waiting for that call: it was forgotten, never charged', async () => {
    const a = await queuedAssessment();
    wire.set({ status: 503 });
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['retrying']);
    expect(await t.deps.db.verticalJob.findUniqueOrThrow({ where: { id: a.jobId } })).toMatchObject({ status: 'queued', requestId: null });
    wire.reset({ content: ANSWER });
    t.clock.advance(30_000);
    const started = Date.now();
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['succeeded']);
    expect(Date.now() - started).toBeLessThan(t.deps.config.routingTimeoutMs);
    expect(await succeededUsage(a.projectId)).toHaveLength(1);
  });
});
