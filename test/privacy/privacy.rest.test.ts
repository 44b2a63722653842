import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectQueued, governedProject } from '../governance/support.ts';
import { purgeExpiredRetention } from '../../src/jobs/retention-purge/purge.ts';

// CONTRACT §11 (the pii option) and §12 (retention, GET /v1/inference/{id}) over REST, with the built-in mock
// provider, which answers with the last user message: what it echoes is what it saw.

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  // The deadline is tested with an injected clock; a loaded test machine must not trip the real one.
  t = await buildTestApp({ env: { SVC_PII_TIMEOUT_MS: '10000' } });
  operator = client(t.app);
}, 120_000);
afterAll(() => t.close());

const SCOPES = ['inference:write', 'inference:read', 'governance:manage', 'usage:read'];
const user = (content: string) => [{ role: 'user', content }];
const PROMPT = 'Reach me at jane.doe@example.com or +1 415 555 2671, card 4111 1111 1111 1111, ip 10.0.0.7.';
const REDACTED = 'Reach me at [EMAIL_1] or [PHONE_1], card [CARD_1], ip [IP_1].';

async function project(scopes = SCOPES) {
  const p = await seedProject(operator, { scopes });
  return { ...p, api: client(t.app, p.secret) };
}

describe('PII redaction', () => {
  it('redacts before the provider sees the messages and counts what it replaced', async () => {
    const { api, projectId } = await project();
    const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user(PROMPT), pii: { redact: true } });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.message.content).toBe(REDACTED);
    expect(res.body.pii).toEqual({ redacted: { email: 1, phone: 1, card: 1, ip: 1 } });
    // Without the option (and no project default) nothing is redacted and the response has no pii field.
    const plain = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user(PROMPT) });
    expect(plain.body.message.content).toBe(PROMPT);
    expect(plain.body).not.toHaveProperty('pii');
  });

  it('restores the originals in the answer, on /v1/inference and /v1/chat/completions', async () => {
    const { api, projectId } = await project();
    const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user(PROMPT), pii: { redact: true, restore: true } });
    expect(res.body.message.content).toBe(PROMPT);
    expect(res.body.pii.redacted.email).toBe(1);
    const chat = await api.post('/v1/chat/completions', { model: 'mock-1', messages: user(PROMPT), pii: { redact: true, restore: true } });
    expect(chat.status, chat.raw).toBe(200);
    expect(chat.body.choices[0].message.content).toBe(PROMPT);
    expect(chat.body.pii).toEqual({ redacted: { email: 1, phone: 1, card: 1, ip: 1 } });
    const noRestore = await api.post('/v1/chat/completions', { model: 'mock-1', messages: user(PROMPT), pii: { redact: true } });
    expect(noRestore.body.choices[0].message.content).toBe(REDACTED);
  });

  it('restores a streamed answer too, and the done event carries the counts', async () => {
    const { api, projectId } = await project();
    const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', stream: true, messages: user(PROMPT), pii: { redact: true, restore: true } });
    expect(res.status).toBe(200);
    const events = res.raw.split('\n\n').filter(Boolean).map((b) => ({ event: /event: (.*)/.exec(b)?.[1], data: JSON.parse(/data: (.*)/.exec(b)![1]!) }));
    const text = events.filter((e) => e.event === 'delta').map((e) => e.data.delta.content).join('');
    expect(text).toBe(PROMPT);
    const done = events.find((e) => e.event === 'done')!.data;
    expect(done.message.content).toBe(PROMPT);
    expect(done.pii).toEqual({ redacted: { email: 1, phone: 1, card: 1, ip: 1 } });
  });

  it('uses the project default set by PUT /v1/projects/{id}/pii; a request can turn it off', async () => {
    const { api, projectId } = await project();
    const set = await api.put(`/v1/projects/${projectId}/pii`, { redact: true });
    expect(set.status, set.raw).toBe(200);
    expect(set.body).toMatchObject({ object: 'svc.pii_policy', project_id: projectId, redact: true });
    expect((await api.get(`/v1/projects/${projectId}/pii`)).body.redact).toBe(true);
    const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user('mail a@b.io') });
    expect(res.body.message.content).toBe('mail [EMAIL_1]');
    const off = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user('mail a@b.io'), pii: { redact: false } });
    expect(off.body.message.content).toBe('mail a@b.io');
    const audit = await operator.get('/v1/audit/events', { query: { project_id: projectId, action: 'pii.update' } });
    expect(audit.body.data[0].data).toEqual({ redact: true, previous: false });
    const events = await t.deps.db.event.findMany({ where: { projectId, type: 'policy.updated' } });
    expect(events.map((e) => e.data)).toEqual([{ policy: 'pii', redact: true }]);
  });

  it('keys the response cache on the redacted request: another e-mail in the same sentence is a hit, restored with its own value', async () => {
    const { api, projectId } = await project();
    const ask = (mail: string) => api.post('/v1/inference', { project_id: projectId, model: 'mock-1', cache: true, messages: user(`write to ${mail}`), pii: { redact: true, restore: true } });
    const first = await ask('ann@example.com');
    expect(first.body.cache_hit).toBe(false);
    const second = await ask('bob@example.org');
    expect(second.body.cache_hit).toBe(true);
    expect(second.body.message.content).toBe('write to bob@example.org');
  });

  it('answers 422 pii_redaction_failed past SVC_PII_TIMEOUT_MS, and the provider is not called', async () => {
    const { api, projectId } = await project();
    const privacy = t.deps.ports.inference.privacy;
    const real = privacy.monotonicNow;
    let now = 0;
    privacy.monotonicNow = () => (now += 60_000); // every look at the clock is a minute later
    try {
      const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user(PROMPT), pii: { redact: true } });
      expectError(res, 422, 'pii_redaction_failed');
      const chat = await api.post('/v1/chat/completions', { model: 'mock-1', messages: user(PROMPT), pii: { redact: true } });
      expect(chat.status).toBe(422);
      expect(chat.body.error.code).toBe('pii_redaction_failed');
    } finally {
      privacy.monotonicNow = real;
    }
    const usage = await api.get('/v1/usage', { query: { granularity: 'request', project_id: projectId } });
    expect(usage.body.data.map((u: any) => ({ status: u.status, error_code: u.error_code, route: u.route, tokens: u.prompt_tokens }))).toEqual([
      { status: 'failed', error_code: 'pii_redaction_failed', route: null, tokens: 0 },
      { status: 'failed', error_code: 'pii_redaction_failed', route: null, tokens: 0 },
    ]);
  });

  it('refuses a malformed pii option or setting, naming the field', async () => {
    const { api, projectId } = await project();
    expectError(await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user('x'), pii: { restore: true } }), 400, 'invalid_request', 'pii.redact');
    expectError(await api.put(`/v1/projects/${projectId}/pii`, { redact: 'yes' }), 400, 'invalid_request', 'redact');
  });
});

describe('retention and GET /v1/inference/{id}', () => {
  it('new projects keep content 30 days; GET returns the response, request and status', async () => {
    const { api, projectId } = await project();
    expect((await api.get(`/v1/projects/${projectId}/retention`)).body).toMatchObject({ object: 'svc.retention_policy', mode: 'standard', days: 30 });
    const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user('hello there') });
    const got = await api.get(`/v1/inference/${res.body.id}`);
    expect(got.status, got.raw).toBe(200);
    expect(got.body).toEqual({ ...res.body, project_id: projectId, status: 'succeeded', request: { model: 'mock-1', messages: user('hello there') } });
    // The chat completion's id reads the same way.
    const chat = await api.post('/v1/chat/completions', { model: 'mock-1', messages: user('from chat') });
    const read = await api.get(`/v1/inference/${chat.body.id}`);
    expect(read.body.message.content).toBe('from chat');
  });

  it('keeps the redacted request (what the provider saw), sealed at rest', async () => {
    const { api, projectId } = await project();
    const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user(PROMPT), pii: { redact: true, restore: true } });
    const got = await api.get(`/v1/inference/${res.body.id}`);
    expect(got.body.request.messages).toEqual(user(REDACTED));
    expect(got.body.pii).toEqual(res.body.pii);
    const row = await t.deps.db.retainedInference.findUniqueOrThrow({ where: { id: res.body.id } });
    expect(row.sealed).not.toContain('Reach me');
    expect(row.sealed!.split('.')).toHaveLength(3);
  });

  it('answers 404 record_not_retained past the retention, and the purge job drops the content', async () => {
    const { api, projectId } = await project();
    const set = await api.put(`/v1/projects/${projectId}/retention`, { mode: 'standard', days: 1 });
    expect(set.body).toMatchObject({ mode: 'standard', days: 1 });
    const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user('short lived') });
    expect((await api.get(`/v1/inference/${res.body.id}`)).status).toBe(200);
    t.clock.advanceHours(25);
    expectError(await api.get(`/v1/inference/${res.body.id}`), 404, 'record_not_retained', 'inference_id');
    expect(await purgeExpiredRetention(t.deps)).toBeGreaterThanOrEqual(1);
    const row = await t.deps.db.retainedInference.findUniqueOrThrow({ where: { id: res.body.id } });
    expect(row.sealed).toBeNull();
    expectError(await api.get(`/v1/inference/${res.body.id}`), 404, 'record_not_retained');
    // Usage records (no content) stay.
    const usage = await api.get('/v1/usage', { query: { granularity: 'request', project_id: projectId } });
    expect(usage.body.data).toHaveLength(1);
  });

  it('answers 404 not_found for an unknown id and for another project\'s id', async () => {
    const a = await project();
    const b = await project();
    const res = await a.api.post('/v1/inference', { project_id: a.projectId, model: 'mock-1', messages: user('mine') });
    expectError(await a.api.get('/v1/inference/inf_0000000000000000000000'), 404, 'not_found', 'inference_id');
    expectError(await b.api.get(`/v1/inference/${res.body.id}`), 404, 'not_found', 'inference_id');
    // The operator reads any project's.
    expect((await operator.get(`/v1/inference/${res.body.id}`)).status).toBe(200);
  });

  it("answers 404 not_found for another project's settings", async () => {
    const a = await project();
    const b = await project();
    expectError(await a.api.put(`/v1/projects/${b.projectId}/retention`, { mode: 'zero' }), 404, 'not_found');
    expectError(await a.api.put(`/v1/projects/${b.projectId}/pii`, { redact: true }), 404, 'not_found');
    expectError(await a.api.get(`/v1/projects/${b.projectId}/retention`), 404, 'not_found');
    expect((await operator.get(`/v1/projects/${b.projectId}/retention`)).body.mode).toBe('standard');
    expect((await operator.get(`/v1/projects/${b.projectId}/pii`)).body.redact).toBe(false);
  });

  it('needs inference:read to read, governance:manage to set', async () => {
    const { api, projectId } = await project(['inference:write']);
    const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user('x') });
    expectError(await api.get(`/v1/inference/${res.body.id}`), 403, 'insufficient_scope');
    expectError(await api.put(`/v1/projects/${projectId}/retention`, { mode: 'zero' }), 403, 'insufficient_scope');
    expectError(await api.put(`/v1/projects/${projectId}/pii`, { redact: true }), 403, 'insufficient_scope');
  });

  it('refuses bad retention settings, naming the field', async () => {
    const { api, projectId } = await project();
    expectError(await api.put(`/v1/projects/${projectId}/retention`, { mode: 'forever' }), 400, 'invalid_request', 'mode');
    expectError(await api.put(`/v1/projects/${projectId}/retention`, { mode: 'standard', days: 0 }), 400, 'invalid_request', 'days');
    expectError(await api.put(`/v1/projects/${projectId}/retention`, { mode: 'standard', days: 366 }), 400, 'invalid_request', 'days');
  });

  it('zero retention: no content kept, cache off, an idempotent replay answers 404 record_not_retained without running again', async () => {
    const { api, projectId } = await project();
    const set = await api.put(`/v1/projects/${projectId}/retention`, { mode: 'zero' });
    expect(set.body).toMatchObject({ mode: 'zero' });
    const body = { project_id: projectId, model: 'mock-1', cache: true, messages: user('zero please') };
    const first = await api.post('/v1/inference', body, { headers: { 'idempotency-key': 'zero-1' } });
    expect(first.status).toBe(200);
    expect(first.body.cache_hit).toBe(false);
    expect(first.headers['x-svc-cache']).not.toBe('miss');
    const replay = await api.post('/v1/inference', body, { headers: { 'idempotency-key': 'zero-1' } });
    expectErrorReplayed(replay);
    expectError(await api.get(`/v1/inference/${first.body.id}`), 404, 'record_not_retained', 'inference_id');
    const again = await api.post('/v1/inference', body);
    expect(again.body.cache_hit).toBe(false);
    // A stream too: its first answer is streamed, its replay is the 404.
    const streamed = await api.post('/v1/inference', { ...body, stream: true }, { headers: { 'idempotency-key': 'zero-2' } });
    expect(streamed.status).toBe(200);
    expect(streamed.raw).toContain('zero please');
    expectErrorReplayed(await api.post('/v1/inference', { ...body, stream: true }, { headers: { 'idempotency-key': 'zero-2' } }));
    const usage = await api.get('/v1/usage', { query: { granularity: 'request', project_id: projectId } });
    expect(usage.body.data).toHaveLength(3); // the replays ran nothing
  });

  it('switching to zero drops what was kept; a shorter period shortens what was kept', async () => {
    const { api, projectId } = await project();
    const kept = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user('kept') });
    expect((await api.get(`/v1/inference/${kept.body.id}`)).status).toBe(200);
    await api.put(`/v1/projects/${projectId}/retention`, { mode: 'standard', days: 2 });
    t.clock.advanceHours(49);
    expectError(await api.get(`/v1/inference/${kept.body.id}`), 404, 'record_not_retained');
    const other = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: user('kept too') });
    await api.put(`/v1/projects/${projectId}/retention`, { mode: 'zero' });
    expectError(await api.get(`/v1/inference/${other.body.id}`), 404, 'record_not_retained');
  });

  it('puts pii and retention under dual control', async () => {
    const g = await governedProject(operator, ['pii', 'retention']);
    const requester = client(t.app, g.requester.secret);
    const approver = client(t.app, g.approver.secret);
    const pii = expectQueued(await requester.put(`/v1/projects/${g.projectId}/pii`, { redact: true }));
    const retention = expectQueued(await requester.put(`/v1/projects/${g.projectId}/retention`, { mode: 'zero' }));
    expect((await operator.get(`/v1/projects/${g.projectId}/retention`)).body.mode).toBe('standard');
    const a1 = await approver.post(`/v1/approvals/${pii}/approve`);
    expect(a1.body.before).toEqual({ redact: false });
    expect(a1.body.status, a1.raw).toBe('approved');
    expect((await approver.post(`/v1/approvals/${retention}/approve`)).body.status).toBe('approved');
    const after = await operator.get(`/v1/projects/${g.projectId}/retention`);
    expect(after.body.mode).toBe('zero');
    expect((await operator.get(`/v1/projects/${g.projectId}/pii`)).body.redact).toBe(true);
  });
});

function expectErrorReplayed(res: { status: number; headers: Record<string, unknown>; body: any }) {
  expect(res.headers['idempotent-replayed']).toBe('true');
  expect({ status: res.status, code: res.body?.error?.code, param: res.body?.error?.param }).toEqual({ status: 404, code: 'record_not_retained', param: 'Idempotency-Key' });
}

describe('/v1/responses store and previous_response_id', () => {
  it('continues a stored response; refuses an unknown one', async () => {
    const { api } = await project();
    const first = await api.post('/v1/responses', { model: 'mock-1', input: 'first turn', store: true });
    expect(first.status, first.raw).toBe(200);
    expect(first.body.store).toBe(true);
    const second = await api.post('/v1/responses', { model: 'mock-1', input: 'second turn', previous_response_id: first.body.id });
    expect(second.status, second.raw).toBe(200);
    expect(second.body.previous_response_id).toBe(first.body.id);
    const kept = await api.get(`/v1/inference/${second.body.id}`);
    expect(kept.body.request.messages).toEqual([
      { role: 'user', content: 'first turn' },
      { role: 'assistant', content: 'first turn' },
      { role: 'user', content: 'second turn' },
    ]);
    expectError(await api.post('/v1/responses', { model: 'mock-1', input: 'x', previous_response_id: 'inf_nope' }), 400, 'invalid_request', 'previous_response_id');
  });

  it('under zero retention store: true is 400 param store, and nothing can be continued', async () => {
    const { api, projectId } = await project();
    const first = await api.post('/v1/responses', { model: 'mock-1', input: 'before' });
    await api.put(`/v1/projects/${projectId}/retention`, { mode: 'zero' });
    expectError(await api.post('/v1/responses', { model: 'mock-1', input: 'x', store: true }), 400, 'invalid_request', 'store');
    expectError(await api.post('/v1/responses', { model: 'mock-1', input: 'x', previous_response_id: first.body.id }), 400, 'invalid_request', 'previous_response_id');
  });
});
