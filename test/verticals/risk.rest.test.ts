import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import type { Receiver } from '../helpers/https-receiver.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { uniqueName } from '../helpers/services.ts';
import { expectQueued } from '../governance/support.ts';
import { webhookEnv } from '../webhooks/support.ts';
import { deliver, receiverFor, runVerticalWork, verticalProject } from './support.ts';

let t: TestApp;
let operator: Client;
const receivers: Receiver[] = [];
const RISK = ['risk:write', 'inference:write'];

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t.close();
});

const as = (secret: string) => client(t.app, secret);
const CASE = { title: 'Vendor access review', assignee: 'alice', reviewer: 'bob' };
const b64 = (s: string) => Buffer.from(s).toString('base64');

async function newCase(api: Client, body: Record<string, unknown> = CASE) {
  const res = await api.post('/v1/risk/cases', body);
  expect(res.status, res.raw).toBe(200);
  return res.body;
}

describe('cases', () => {
  it('opens a case, lists it newest first with pagination, and audits risk_case.create', async () => {
    const p = await verticalProject(operator, RISK);
    const api = as(p.secret);
    const a = await newCase(api);
    expect(a).toMatchObject({ object: 'svc.risk.case', project_id: p.projectId, status: 'open', assignee: 'alice', reviewer: 'bob', disposition: null });
    expect(a.id).toMatch(/^cas_/);
    const b = await newCase(api, { ...CASE, title: 'Second' });
    const page1 = await api.get('/v1/risk/cases', { query: { limit: 1 } });
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, url: '/v1/risk/cases' });
    expect(page1.body.data.map((c: any) => c.id)).toEqual([b.id]);
    const page2 = await api.get('/v1/risk/cases', { query: { limit: 1, starting_after: b.id } });
    expect(page2.body.data.map((c: any) => c.id)).toEqual([a.id]);
    const audit = await operator.get('/v1/audit/events', { query: { project_id: p.projectId, action: 'risk_case.create' } });
    expect(audit.body.data.map((e: any) => e.target_id).sort()).toEqual([a.id, b.id].sort());
  });

  it('refuses a reviewer equal to the assignee: 409 segregation_of_duties, on create and on update', async () => {
    const p = await verticalProject(operator, RISK);
    const api = as(p.secret);
    expectError(await api.post('/v1/risk/cases', { ...CASE, reviewer: 'Alice' }), 409, 'segregation_of_duties', 'reviewer');
    const c = await newCase(api);
    expectError(await api.patch(`/v1/risk/cases/${c.id}`, { reviewer: 'alice' }), 409, 'segregation_of_duties', 'reviewer');
    expectError(await api.patch(`/v1/risk/cases/${c.id}`, { assignee: 'bob' }), 409, 'segregation_of_duties', 'reviewer');
    expect((await api.get(`/v1/risk/cases/${c.id}`)).body).toMatchObject({ assignee: 'alice', reviewer: 'bob' });
    const ok = await api.patch(`/v1/risk/cases/${c.id}`, { reviewer: 'carol' });
    expect(ok.body).toMatchObject({ reviewer: 'carol' });
  });

  it('closes with a disposition once: risk.case.closed reaches a webhook receiver, audited risk_case.close', async () => {
    const p = await verticalProject(operator, RISK);
    const r = await receiverFor(operator, p.projectId, ['risk.case.closed']);
    receivers.push(r);
    const api = as(p.secret);
    const c = await newCase(api);
    const closed = await api.post(`/v1/risk/cases/${c.id}/close`, { disposition: 'mitigated', note: 'keys rotated' });
    expect(closed.body).toMatchObject({ status: 'closed', disposition: 'mitigated', closed_by: p.keyId });
    const again = await api.post(`/v1/risk/cases/${c.id}/close`, { disposition: 'accepted' });
    expect(again.body).toMatchObject({ status: 'closed', disposition: 'mitigated' });
    expectError(await api.post(`/v1/risk/cases/${c.id}/close`, { disposition: 'forgotten' }), 400, 'invalid_request', 'disposition');
    const [event] = await deliver(t, r, 1);
    expect(event).toMatchObject({ type: 'risk.case.closed', data: { case_id: c.id, disposition: 'mitigated', closed_by: p.keyId, title: CASE.title } });
    expect(r.receipts).toHaveLength(1);
    const audit = await operator.get('/v1/audit/events', { query: { project_id: p.projectId, action: 'risk_case.close' } });
    expect(audit.body.data).toHaveLength(1);
  });
});

describe('evidence', () => {
  it('fixes the bytes at upload with their SHA-256; PATCH of the bytes is 409 evidence_immutable, metadata may change', async () => {
    const p = await verticalProject(operator, RISK);
    const api = as(p.secret);
    const c = await newCase(api);
    const bytes = 'access log export 2026-11-01';
    const up = await api.post(`/v1/risk/cases/${c.id}/evidence`, { name: 'log.txt', content_type: 'text/plain', content_base64: b64(bytes) });
    expect(up.status, up.raw).toBe(200);
    const sha = createHash('sha256').update(bytes).digest('hex');
    expect(up.body).toMatchObject({ object: 'svc.risk.evidence', case_id: c.id, name: 'log.txt', sha256: sha, size: bytes.length, content_type: 'text/plain' });
    expect(up.body.id).toMatch(/^evi_/);

    const patchBytes = await api.patch(`/v1/risk/evidence/${up.body.id}`, { content_base64: b64('tampered') });
    expectError(patchBytes, 409, 'evidence_immutable', 'content_base64');
    expectError(await api.patch(`/v1/risk/evidence/${up.body.id}`, { content_type: 'image/png' }), 409, 'evidence_immutable', 'content_type');
    const meta = await api.patch(`/v1/risk/evidence/${up.body.id}`, { description: 'exported by IT', metadata: { source: 'siem' } });
    expect(meta.body).toMatchObject({ description: 'exported by IT', metadata: { source: 'siem' }, sha256: sha, size: bytes.length });
    const stored = await t.deps.db.riskEvidence.findUnique({ where: { id: up.body.id } });
    expect(Buffer.from(stored!.content).toString()).toBe(bytes);
    const download = await api.get(`/v1/risk/evidence/${up.body.id}/content`);
    expect(download.status).toBe(200);
    expect(download.raw).toBe(bytes);
    expect(download.headers).toMatchObject({ 'content-type': 'text/plain', 'x-svc-evidence-sha256': sha, 'content-disposition': 'attachment', 'x-content-type-options': 'nosniff' });
    expectError(await api.post(`/v1/risk/cases/${c.id}/evidence`, { name: 'x', content_type: 'text/html\r\nX-Evil: 1', content_base64: b64('x') }), 400, 'invalid_request', 'content_type');
    const list = await api.get(`/v1/risk/cases/${c.id}/evidence`);
    expect(list.body.data.map((e: any) => e.sha256)).toEqual([sha]);
  });
});

describe('assessments and reports', () => {
  it('drafts an assessment through the inference pipeline as the key, with structured output from the mock', async () => {
    const p = await verticalProject(operator, RISK);
    const api = as(p.secret);
    const c = await newCase(api);
    await api.post(`/v1/risk/cases/${c.id}/evidence`, { name: 'a.txt', content_base64: b64('a') });
    const queued = await api.post(`/v1/risk/cases/${c.id}/assessments`, { instructions: 'focus on access' });
    expect(queued.body).toMatchObject({ object: 'svc.risk.assessment', status: 'queued', case_id: c.id, content: null });
    expect(queued.body.id).toMatch(/^rsa_/);
    expect(await runVerticalWork(t)).toEqual(['succeeded']);
    const done = await api.get(`/v1/risk/assessments/${queued.body.id}`);
    expect(done.body.status).toBe('completed');
    expect(done.body.content).toMatchObject({ likelihood: 'low', impact: 'low' });
    expect(Array.isArray(done.body.content.risks)).toBe(true);
    // The same pipeline as a direct call: a usage record of the key, with the job's metadata.
    const job = await t.deps.db.verticalJob.findFirst({ where: { subjectId: queued.body.id } });
    expect(job).toMatchObject({ status: 'succeeded', keyId: p.keyId, attempts: 1 });
    expect(job!.inferenceIds).toHaveLength(1);
    await t.deps.outcomes.flush();
    const usage = await t.deps.db.usageRecord.findMany({ where: { projectId: p.projectId } });
    expect(usage).toHaveLength(1);
    expect(usage[0]).toMatchObject({ keyId: p.keyId, status: 'succeeded', model: 'mock-1' });
    expect(usage[0]!.promptTokens).toBeGreaterThan(0);
  });

  it('approves a drafted report only through another key (dual control): risk.report.approved reaches the receiver', async () => {
    const p = await verticalProject(operator, RISK);
    const approver = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('approver'), scopes: ['risk:approve'] });
    const r = await receiverFor(operator, p.projectId, ['risk.report.approved', 'approval.approved']);
    receivers.push(r);
    const api = as(p.secret);
    const c = await newCase(api);
    const report = (await api.post(`/v1/risk/cases/${c.id}/reports`, {})).body;
    expect(report).toMatchObject({ object: 'svc.risk.report', status: 'queued', approval_id: null });
    // Not drafted yet: nothing to approve.
    expectError(await api.post(`/v1/risk/reports/${report.id}/approve`), 400, 'invalid_request', 'report_id');
    await runVerticalWork(t);
    expect((await api.get(`/v1/risk/reports/${report.id}`)).body.content).toMatchObject({ title: expect.any(String), findings: expect.any(Array) });

    const approvalId = expectQueued(await api.post(`/v1/risk/reports/${report.id}/approve`));
    expect((await api.get(`/v1/risk/reports/${report.id}`)).body.status).toBe('completed');
    // The key that asked cannot approve its own request.
    const self = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('both'), scopes: ['risk:write', 'risk:approve', 'inference:write'] });
    const selfAsk = await as(self.body.secret).post(`/v1/risk/reports/${report.id}/approve`);
    expectError(await as(self.body.secret).post(`/v1/approvals/${expectQueued(selfAsk)}/approve`), 409, 'segregation_of_duties');

    // The approver sees the report it approves.
    const asApproval = await as(approver.body.secret).get(`/v1/approvals/${approvalId}`);
    expect(asApproval.body).toMatchObject({ action: 'risk_report.approve', resource: 'risk_reports', params: { report_id: report.id }, status: 'pending' });
    expect(asApproval.body.before).toMatchObject({ case_id: c.id, status: 'completed', content: { title: expect.any(String) } });
    const approved = await as(approver.body.secret).post(`/v1/approvals/${approvalId}/approve`);
    expect(approved.body, approved.raw).toMatchObject({ status: 'approved', action: 'risk_report.approve', decided_by: approver.body.id, result_id: report.id });
    const after = (await api.get(`/v1/risk/reports/${report.id}`)).body;
    expect(after).toMatchObject({ status: 'approved', approval_id: approvalId, approved_by: approver.body.id });

    const events = await deliver(t, r, 2);
    expect(events.map((e) => e.type).sort()).toEqual(['approval.approved', 'risk.report.approved']);
    expect(events.find((e) => e.type === 'risk.report.approved')!.data).toEqual({
      report_id: report.id,
      case_id: c.id,
      approval_id: approvalId,
      requested_by: p.keyId,
      approved_by: approver.body.id,
    });
  });
});

describe('scopes and isolation', () => {
  it('needs risk:write for writes, risk:read or write for reads, and inference:write for model work (spec §5.6)', async () => {
    const p = await verticalProject(operator, RISK);
    const c = await newCase(as(p.secret));
    const reader = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('reader'), scopes: ['risk:read'] });
    const ops = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('ops'), scopes: ['ops:write', 'inference:write'] });
    const noInference = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('noinf'), scopes: ['risk:write'] });
    expect((await as(reader.body.secret).get(`/v1/risk/cases/${c.id}`)).status).toBe(200);
    await expectScopeRequired(as(reader.body.secret), [{ method: 'post', url: '/v1/risk/cases', body: CASE }]);
    await expectScopeRequired(as(ops.body.secret), [
      { method: 'get', url: '/v1/risk/cases' },
      { method: 'post', url: '/v1/risk/cases', body: CASE },
      { method: 'post', url: `/v1/risk/cases/${c.id}/assessments`, body: {} },
    ]);
    expect((await as(noInference.body.secret).post('/v1/risk/cases', CASE)).status).toBe(200);
    expectError(await as(noInference.body.secret).post(`/v1/risk/cases/${c.id}/assessments`, {}), 403, 'insufficient_scope');
  });

  it("hides another project's cases, evidence and drafts (404)", async () => {
    const a = await verticalProject(operator, RISK);
    const b = await verticalProject(operator, RISK);
    const c = await newCase(as(a.secret));
    const e = (await as(a.secret).post(`/v1/risk/cases/${c.id}/evidence`, { name: 'x', content_base64: b64('x') })).body;
    const rsa = (await as(a.secret).post(`/v1/risk/cases/${c.id}/assessments`, {})).body;
    await expectHiddenFrom(as(b.secret), [
      { method: 'get', url: `/v1/risk/cases/${c.id}` },
      { method: 'post', url: `/v1/risk/cases/${c.id}/close`, body: { disposition: 'accepted' } },
      { method: 'post', url: `/v1/risk/cases/${c.id}/evidence`, body: { name: 'y', content_base64: b64('y') } },
      { method: 'get', url: `/v1/risk/evidence/${e.id}` },
      { method: 'get', url: `/v1/risk/evidence/${e.id}/content` },
      { method: 'get', url: `/v1/risk/assessments/${rsa.id}` },
      { method: 'post', url: '/v1/risk/cases', body: { ...CASE, project_id: a.projectId } },
    ]);
    expect((await as(b.secret).get('/v1/risk/cases')).body.data).toEqual([]);
  });
});
