import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimDue } from '../../src/domain/verticals/store.ts';
import { ASSESSMENT_PROMPT } from '../../src/domain/risk/prompts.ts';
import { VerticalWorker } from '../../src/jobs/vertical-work/worker.ts';
import { builtinPromptsOnly } from '../../src/domain/verticals/ports.ts';
import { client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import type { MockOpenAI } from '../helpers/mock-openai.ts';
import { uniqueName } from '../helpers/services.ts';
import { startWireApp, verticalProject } from './support.ts';

let t: TestApp;
let operator: Client;
let wire: MockOpenAI;
let close: () => Promise<void>;

beforeAll(async () => ({ t, operator, wire, close } = await startWireApp()));
afterAll(() => close());
beforeEach(() => wire.reset());

const as = (secret: string) => client(t.app, secret);

/** A case with one queued assessment; returns the assessment's id and the project's key. */
async function queuedAssessment(opts: { budgetUsd?: number } = {}) {
  const p = await verticalProject(operator, ['risk:write', 'inference:write']);
  let secret = p.secret;
  let keyId = p.keyId;
  if (opts.budgetUsd !== undefined) {
    const k = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('budget'), scopes: ['risk:write', 'inference:write'], budget_usd: opts.budgetUsd });
    secret = k.body.secret;
    keyId = k.body.id;
  }
  const c = await as(secret).post('/v1/risk/cases', { title: 'c', assignee: 'a', reviewer: 'b' });
  const rsa = await as(secret).post(`/v1/risk/cases/${c.body.id}/assessments`, {});
  expect(rsa.status, rsa.raw).toBe(200);
  return { ...p, secret, keyId, id: rsa.body.id as string };
}

const statusOf = async (api: Client, id: string) => (await api.get(`/v1/risk/assessments/${id}`)).body;
const jobOf = (subjectId: string) => t.deps.db.verticalJob.findFirstOrThrow({ where: { subjectId } });

describe('the model-work runner', () => {
  it('calls the provider through the pipeline with the built-in prompt, response_format json_schema, and charges the key', async () => {
    const a = await queuedAssessment();
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['succeeded']);
    const req = wire.requests.at(-1)!.body;
    expect(req.response_format).toMatchObject({ type: 'json_schema', json_schema: { name: 'risk_assessment', schema: ASSESSMENT_PROMPT.schema } });
    expect(req.messages[0]).toMatchObject({ role: 'system' });
    expect(req.messages[0].content).toContain('[svc:risk.assessment]');
    expect(req.messages[1].content).toContain('Case:');
    expect(req.model).toBe('wire-1');
    const done = await statusOf(as(a.secret), a.id);
    expect(done.status).toBe('completed');
    await t.deps.outcomes.flush();
    const usage = await t.deps.db.usageRecord.findFirstOrThrow({ where: { projectId: a.projectId } });
    expect(usage).toMatchObject({ keyId: a.keyId, model: 'wire-1', status: 'succeeded' });
    expect(usage.costMicros).toBeGreaterThan(0n);
  });

  it('retries a provider failure after a delay, then succeeds', async () => {
    const a = await queuedAssessment();
    wire.set({ status: 503 });
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['retrying']);
    expect(await jobOf(a.id)).toMatchObject({ status: 'queued', attempts: 1, error: { code: 'model_unavailable' } });
    wire.reset();
    expect(await new VerticalWorker(t.deps).runDue()).toEqual([]); // not due yet (30 s)
    t.clock.advance(30_000);
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['succeeded']);
    expect(await jobOf(a.id)).toMatchObject({ status: 'succeeded', attempts: 2 });
  });

  it("waits for the key's rate-limit window (Retry-After) without spending a try", async () => {
    const p = await seedProject(operator, { scopes: ['risk:write', 'inference:write'], limits: { requests_per_minute: 2, tokens_per_minute: 100_000, burst: 0 } });
    const api = as(p.secret);
    const c = await api.post('/v1/risk/cases', { title: 'c', assignee: 'a', reviewer: 'b' });
    const rsa = await api.post(`/v1/risk/cases/${c.body.id}/assessments`, {});
    expect(rsa.status, rsa.raw).toBe(200);
    // The two requests above used the key's window: the work is turned away before any provider call.
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['retrying']);
    const job = await jobOf(rsa.body.id);
    expect(job).toMatchObject({ status: 'queued', attempts: 0, error: { code: 'rate_limit_exceeded' } });
    expect(job.runAfter.getTime()).toBeGreaterThan(t.clock.now());
    expect(wire.requests).toHaveLength(0);
    t.clock.advance(60_000);
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['succeeded']);
    expect(await jobOf(rsa.body.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
  });

  it('fails with structured_output_failed when the answer does not match the schema', async () => {
    const a = await queuedAssessment();
    wire.set({ content: '{"summary": 1}' });
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['failed']);
    const failed = await statusOf(as(a.secret), a.id);
    expect(failed).toMatchObject({ status: 'failed', content: null, error: { code: 'structured_output_failed' } });
  });

  it("applies the key's budget: a key whose budget is spent fails its work with budget_exceeded", async () => {
    const a = await queuedAssessment({ budgetUsd: 0 });
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['failed']);
    expect(await statusOf(as(a.secret), a.id)).toMatchObject({ status: 'failed', error: { code: 'budget_exceeded' } });
    expect(wire.requests).toHaveLength(0);
  });

  it('fails the work of a key revoked meanwhile (invalid_api_key)', async () => {
    const a = await queuedAssessment();
    expect((await operator.post(`/v1/keys/${a.keyId}/revoke`)).status).toBe(200);
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['failed']);
    expect((await jobOf(a.id)).error).toMatchObject({ code: 'invalid_api_key' });
  });

  it('resumes a job whose worker stopped mid-way once its lease has run out', async () => {
    const a = await queuedAssessment();
    const now = new Date(t.clock.now());
    // A worker claims it and dies.
    const claimed = await claimDue(t.deps.db, now, new Date(now.getTime() + 60_000), 10);
    expect(claimed.map((j) => j.subjectId)).toEqual([a.id]);
    expect(await new VerticalWorker(t.deps).runDue()).toEqual([]);
    t.clock.advance(60_000);
    expect(await new VerticalWorker(t.deps).runDue()).toEqual(['succeeded']);
    expect(await jobOf(a.id)).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect(wire.requests).toHaveLength(1);
  });

  it("renders the project's own template named as the built-in prompt, through the pipeline's template stage", async () => {
    const a = await queuedAssessment();
    const tpl = await operator.post('/v1/templates', {
      project_id: a.projectId,
      name: 'risk.assessment',
      messages: [{ role: 'system', content: 'House style. Case: {{case}}' }],
      variables: [{ name: 'case' }],
      params: { temperature: 0.5 },
    });
    expect(tpl.status, tpl.raw).toBe(200);
    const outcomes = await new VerticalWorker(t.deps).runDue();
    expect(outcomes, JSON.stringify((await jobOf(a.id)).error)).toEqual(['succeeded']);
    const body = wire.requests.at(-1)!.body;
    expect(body.messages).toHaveLength(1);
    expect(body.messages[0].content).toMatch(/^House style\. Case: \{\n {2}"id": "cas_/);
    expect(body.temperature).toBe(0.5);
    // The result's fields stay the vertical's: the built-in schema is asked for and checked.
    expect(body.response_format.json_schema.name).toBe('risk_assessment');
    expect((await statusOf(as(a.secret), a.id)).status).toBe('completed');
    await t.deps.outcomes.flush();
    const usage = await t.deps.db.usageRecord.findFirstOrThrow({ where: { projectId: a.projectId } });
    expect(usage).toMatchObject({ templateId: tpl.body.id, templateVersion: 1 });
  });

  it('keeps the built-in prompt when the worker is told to (builtinPromptsOnly), and in projects without such a template', async () => {
    const a = await queuedAssessment();
    await operator.post('/v1/templates', { project_id: a.projectId, name: 'risk.assessment', messages: [{ role: 'system', content: 'x' }] });
    expect(await new VerticalWorker(t.deps, { prompts: builtinPromptsOnly }).runDue()).toEqual(['succeeded']);
    expect(wire.requests.at(-1)!.body.messages[0].content).toContain('[svc:risk.assessment]');
  });
});
