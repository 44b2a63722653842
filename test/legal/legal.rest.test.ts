import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { uniqueName } from '../helpers/services.ts';
import { runVerticalWork, verticalProject } from '../verticals/support.ts';
import { CONTRACT_TEXT, LEGAL, makePdf, newContract, newMatter, uploadContract } from './support.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
});
afterAll(async () => {
  await t.close();
});

const as = (secret: string) => client(t.app, secret);
const MB = 1024 * 1024;
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const auditOf = async (projectId: string, action: string) =>
  (await operator.get('/v1/audit/events', { query: { project_id: projectId, action } })).body.data as any[];

describe('matters', () => {
  it('opens matters, lists them newest first with pagination and a status filter, updates one; audited', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = as(p.secret);
    const a = await newMatter(api);
    expect(a).toEqual({
      id: expect.stringMatching(/^mat_/),
      object: 'svc.legal_matter',
      project_id: p.projectId,
      name: 'Acme supply agreement',
      client: 'Acme Ltd',
      description: null,
      status: 'open',
      closed_at: null,
      closed_by: null,
      close_reason: null,
      created_at: expect.any(Number),
      updated_at: expect.any(Number),
    });
    const b = await newMatter(api, { name: 'Lease renewal' });
    const page1 = await api.get('/v1/legal/matters', { query: { limit: 1 } });
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, url: '/v1/legal/matters' });
    expect(page1.headers['x-svc-has-more']).toBe('true');
    expect(page1.body.data.map((m: any) => m.id)).toEqual([b.id]);
    const page2 = await api.get('/v1/legal/matters', { query: { limit: 1, starting_after: b.id } });
    expect(page2.body.data.map((m: any) => m.id)).toEqual([a.id]);
    await api.post(`/v1/legal/matters/${a.id}/close`, {});
    expect((await api.get('/v1/legal/matters', { query: { status: 'open' } })).body.data.map((m: any) => m.id)).toEqual([b.id]);
    expect((await api.get('/v1/legal/matters', { query: { status: 'closed' } })).body.data.map((m: any) => m.id)).toEqual([a.id]);
    expectError(await api.get('/v1/legal/matters', { query: { status: 'archived' } }), 400, 'invalid_request', 'status');

    const upd = await api.patch(`/v1/legal/matters/${b.id}`, { description: 'Office lease, 3rd floor', client: 'Beta LLP' });
    expect(upd.body).toMatchObject({ id: b.id, description: 'Office lease, 3rd floor', client: 'Beta LLP', name: 'Lease renewal' });
    const cleared = await api.patch(`/v1/legal/matters/${b.id}`, { client: null });
    expect(cleared.body.client).toBeNull();
    expect((await api.get(`/v1/legal/matters/${b.id}`)).body).toMatchObject({ description: 'Office lease, 3rd floor', client: null });
    expectError(await api.patch(`/v1/legal/matters/${b.id}`, { name: '' }), 400, 'invalid_request', 'name');
    expect((await auditOf(p.projectId, 'legal_matter.create')).map((e) => e.target_id).sort()).toEqual([a.id, b.id].sort());
    expect((await auditOf(p.projectId, 'legal_matter.update')).map((e) => e.data)).toEqual([{ client: null }, { description: 'Office lease, 3rd floor', client: 'Beta LLP' }]);
  });

  it('closes once (idempotent, like a key revoke): the second close returns the same matter, audited once', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = as(p.secret);
    const m = await newMatter(api);
    const closed = await api.post(`/v1/legal/matters/${m.id}/close`, { reason: 'Signed' });
    expect(closed.body).toMatchObject({ status: 'closed', close_reason: 'Signed', closed_by: p.keyId, closed_at: expect.any(Number) });
    t.clock.advance(5_000);
    const again = await api.post(`/v1/legal/matters/${m.id}/close`, { reason: 'Other' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(closed.body);
    const noBody = await api.post(`/v1/legal/matters/${m.id}/close`);
    expect(noBody.body).toEqual(closed.body);
    expect(await auditOf(p.projectId, 'legal_matter.close')).toHaveLength(1);
    expect((await auditOf(p.projectId, 'legal_matter.close'))[0].data).toEqual({ reason: 'Signed' });
  });

  it('replays a create sent again with the same Idempotency-Key', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = as(p.secret);
    const headers = { 'idempotency-key': uniqueName('idem') };
    const first = await api.post('/v1/legal/matters', { name: 'Once' }, { headers });
    const second = await api.post('/v1/legal/matters', { name: 'Once' }, { headers });
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body.id).toBe(first.body.id);
    expectError(await api.post('/v1/legal/matters', { name: 'Twice' }, { headers }), 409, 'idempotency_conflict');
    expect((await api.get('/v1/legal/matters')).body.data).toHaveLength(1);
  });
});

describe('matter_closed', () => {
  it('refuses every kind of write under a closed matter (409 matter_closed, param matter_id); reads still work', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = as(p.secret);
    const m = await newMatter(api);
    const c = await newContract(api, m.id);
    await api.post(`/v1/legal/matters/${m.id}/close`, { reason: 'Signed' });
    expectError(await api.patch(`/v1/legal/matters/${m.id}`, { name: 'Renamed' }), 409, 'matter_closed', 'matter_id');
    expectError(await api.post(`/v1/legal/matters/${m.id}/contracts`, { name: 'side letter', content: 'x' }), 409, 'matter_closed', 'matter_id');
    expectError(await uploadContract(t, p.secret, m.id, { name: 'side.md', type: 'text/markdown', data: '# Side letter' }), 409, 'matter_closed', 'matter_id');
    expectError(await api.post(`/v1/legal/contracts/${c.id}/mappings`, { fields: [{ name: 'term' }] }), 409, 'matter_closed', 'matter_id');
    expectError(await api.post(`/v1/legal/contracts/${c.id}/redlines`, { instructions: 'Shorten the payment term.' }), 409, 'matter_closed', 'matter_id');
    // Nothing was written, and everything still reads.
    expect((await api.get(`/v1/legal/matters/${m.id}`)).body).toMatchObject({ name: 'Acme supply agreement', status: 'closed' });
    expect((await api.get(`/v1/legal/matters/${m.id}/contracts`)).body.data.map((x: any) => x.id)).toEqual([c.id]);
    expect((await api.get(`/v1/legal/contracts/${c.id}/mappings`)).body.data).toEqual([]);
    expect(await t.deps.db.verticalJob.count({ where: { projectId: p.projectId } })).toBe(0);
  });

  it('lets work queued before the close complete (the close freezes new writes only)', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = as(p.secret);
    const m = await newMatter(api);
    const c = await newContract(api, m.id);
    const mapping = (await api.post(`/v1/legal/contracts/${c.id}/mappings`, { fields: [{ name: 'name' }] })).body;
    const redline = (await api.post(`/v1/legal/contracts/${c.id}/redlines`, { playbook: 'Cap liability at 2x fees.' })).body;
    await api.post(`/v1/legal/matters/${m.id}/close`, {});
    expect(await runVerticalWork(t)).toEqual(['succeeded', 'succeeded']);
    expect((await api.get(`/v1/legal/mappings/${mapping.id}`)).body.status).toBe('completed');
    expect((await api.get(`/v1/legal/redlines/${redline.id}`)).body.status).toBe('completed');
  });
});

describe('contracts', () => {
  it('adds a contract as JSON: its text fixed with its SHA-256, readable on its own; audited without the text', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = as(p.secret);
    const m = await newMatter(api);
    const c = await newContract(api, m.id);
    expect(c).toEqual({
      id: expect.stringMatching(/^ctr_/),
      object: 'svc.legal_contract',
      project_id: p.projectId,
      matter_id: m.id,
      name: 'msa.txt',
      content_type: 'text/plain',
      bytes: Buffer.byteLength(CONTRACT_TEXT),
      characters: CONTRACT_TEXT.length,
      sha256: sha(CONTRACT_TEXT),
      created_by: p.keyId,
      created_at: expect.any(Number),
    });
    expect((await api.get(`/v1/legal/contracts/${c.id}`)).body).toEqual(c);
    const text = await api.get(`/v1/legal/contracts/${c.id}/text`);
    expect(text.body).toEqual({ object: 'svc.legal_contract_text', contract_id: c.id, sha256: c.sha256, text: CONTRACT_TEXT });
    const second = await newContract(api, m.id, 'Side letter: price fixed for 2026.', 'side letter');
    const list = await api.get(`/v1/legal/matters/${m.id}/contracts`, { query: { limit: 1 } });
    expect(list.body).toMatchObject({ object: 'list', has_more: true, url: `/v1/legal/matters/${m.id}/contracts` });
    expect(list.body.data.map((x: any) => x.id)).toEqual([second.id]);
    const [audit] = await auditOf(p.projectId, 'legal_contract.create').then((a) => a.filter((e) => e.target_id === c.id));
    expect(audit.data).toEqual({ matter_id: m.id, name: 'msa.txt', content_type: 'text/plain', bytes: c.bytes, sha256: c.sha256 });
    expect(JSON.stringify(await auditOf(p.projectId, 'legal_contract.create'))).not.toContain('Governing law');
    expect(t.logs.text).not.toContain('governed by the laws of England');
  });

  it('uploads a PDF made here with pdf-lib (multipart), and markdown and HTML files, through RAG\'s extraction', async () => {
    const p = await verticalProject(operator, LEGAL);
    const m = await newMatter(as(p.secret));
    const pdf = await makePdf(['NON-DISCLOSURE AGREEMENT', 'The Recipient keeps the Information confidential for five years.']);
    const up = await uploadContract(t, p.secret, m.id, { name: 'nda.pdf', type: 'application/pdf', data: pdf }, { name: 'Mutual NDA' });
    expect(up.status, up.raw).toBe(200);
    expect(up.body).toMatchObject({ object: 'svc.legal_contract', name: 'Mutual NDA', content_type: 'application/pdf', bytes: pdf.length });
    const text = (await as(p.secret).get(`/v1/legal/contracts/${up.body.id}/text`)).body.text as string;
    expect(text).toContain('confidential for five years');
    expect(up.body.sha256).toBe(sha(text));

    const md = await uploadContract(t, p.secret, m.id, { name: 'terms.md', type: 'application/octet-stream', data: '# Terms\n\nNet **30** days.' });
    expect(md.body).toMatchObject({ name: 'terms.md', content_type: 'text/markdown' });
    const html = await uploadContract(t, p.secret, m.id, { name: 'terms.html', type: 'text/html', data: '<h1>Terms</h1><script>track()</script><p>Net <b>45</b> days.</p>' });
    expect(html.body.content_type).toBe('text/html');
    const htmlText = (await as(p.secret).get(`/v1/legal/contracts/${html.body.id}/text`)).body.text as string;
    expect(htmlText).toContain('Net 45 days.');
    expect(htmlText).not.toMatch(/<|track/);

    expectError(await uploadContract(t, p.secret, m.id, { name: 'x.bin', type: 'application/octet-stream', data: 'abc' }), 400, 'invalid_request', 'file');
    expectError(await uploadContract(t, p.secret, m.id, { name: 'broken.pdf', type: 'application/pdf', data: 'not a pdf' }), 400, 'invalid_request', 'file');
    expectError(await as(p.secret).post(`/v1/legal/matters/${m.id}/contracts`, { name: 'blank', content: '  \n ' }), 400, 'invalid_request', 'content');
    expectError(await as(p.secret).post(`/v1/legal/matters/${m.id}/contracts`, { name: 'x', content: 'x', content_type: 'application/pdf' }), 400, 'invalid_request', 'content_type');
  });

  it("holds a contract to the plan's document limit: 413 document_too_large (content or file), as RAG uploads", async () => {
    const p = await verticalProject(operator, LEGAL); // starter: 1 MB
    const api = as(p.secret);
    const m = await newMatter(api);
    const big = 'a'.repeat(MB + 1);
    expectError(await api.post(`/v1/legal/matters/${m.id}/contracts`, { name: 'big', content: big }), 413, 'document_too_large', 'content');
    expectError(await uploadContract(t, p.secret, m.id, { name: 'big.txt', type: 'text/plain', data: big }), 413, 'document_too_large', 'file');
    // Over every plan's limit (50 MB): refused before the body is read.
    const huge = await api.post(`/v1/legal/matters/${m.id}/contracts`, { name: 'huge', content: 'a'.repeat(52 * MB) });
    expectError(huge, 413, 'document_too_large', 'content');
    expect((await api.get(`/v1/legal/matters/${m.id}/contracts`)).body.data).toEqual([]);
    // A growth project takes 2 MB.
    const g = await verticalProject(operator, LEGAL, 'growth');
    const gm = await newMatter(as(g.secret));
    const ok = await as(g.secret).post(`/v1/legal/matters/${gm.id}/contracts`, { name: 'two MB', content: 'b'.repeat(2 * MB) });
    expect(ok.status, ok.raw.slice(0, 300)).toBe(200);
    expect(ok.body.bytes).toBe(2 * MB);
  });
});

describe('mappings and redlines on the mock provider', () => {
  it('maps a contract through the inference pipeline as the key: every requested field, quotes checked', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = as(p.secret);
    const m = await newMatter(api);
    const c = await newContract(api, m.id);
    const queued = await api.post(`/v1/legal/contracts/${c.id}/mappings`, {
      fields: [{ name: 'name', description: 'The agreement\'s title' }, { name: 'governing_law' }],
      instructions: 'UK spelling.',
    });
    expect(queued.status, queued.raw).toBe(200);
    expect(queued.body).toEqual({
      id: expect.stringMatching(/^map_/),
      object: 'svc.legal_mapping',
      project_id: p.projectId,
      matter_id: m.id,
      contract_id: c.id,
      status: 'queued',
      instructions: 'UK spelling.',
      fields: [
        { name: 'name', description: "The agreement's title", value: null, quote: null, found: null, quote_verified: null, quote_start: null },
        { name: 'governing_law', description: null, value: null, quote: null, found: null, quote_verified: null, quote_start: null },
      ],
      flagged_quotes: null,
      error: null,
      created_by: p.keyId,
      created_at: expect.any(Number),
      completed_at: null,
    });
    expect(await runVerticalWork(t)).toEqual(['succeeded']);
    const done = (await api.get(`/v1/legal/mappings/${queued.body.id}`)).body;
    // The mock answers JSON sampled from the schema: one field named "name", its quote "quote" (which the contract has).
    expect(done).toMatchObject({ status: 'completed', flagged_quotes: 0, completed_at: expect.any(Number) });
    expect(done.fields).toEqual([
      { name: 'name', description: "The agreement's title", value: 'value', quote: 'quote', found: true, quote_verified: true, quote_start: CONTRACT_TEXT.indexOf('quote') },
      { name: 'governing_law', description: null, value: null, quote: null, found: null, quote_verified: null, quote_start: null },
    ]);
    const list = await api.get(`/v1/legal/contracts/${c.id}/mappings`);
    expect(list.body.data.map((x: any) => x.id)).toEqual([queued.body.id]);
    const job = await t.deps.db.verticalJob.findFirstOrThrow({ where: { subjectId: queued.body.id } });
    expect(job).toMatchObject({ kind: 'legal.mapping', status: 'succeeded', keyId: p.keyId });
    await t.deps.outcomes.flush();
    const usage = await t.deps.db.usageRecord.findMany({ where: { projectId: p.projectId } });
    expect(usage).toHaveLength(1);
    expect(usage[0]).toMatchObject({ keyId: p.keyId, model: 'mock-1', status: 'succeeded' });
    expect((await auditOf(p.projectId, 'legal_mapping.create'))[0]).toMatchObject({ target_id: queued.body.id, data: { contract_id: c.id, matter_id: m.id, job_id: job.id } });
  });

  it('drafts a redline: the edits the gateway could apply, and its unified diff of the contract', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = as(p.secret);
    const m = await newMatter(api);
    const c = await newContract(api, m.id);
    const queued = await api.post(`/v1/legal/contracts/${c.id}/redlines`, { playbook: 'Liability: cap at 2x annual fees.', instructions: 'Be brief.' });
    expect(queued.body).toMatchObject({
      id: expect.stringMatching(/^red_/),
      object: 'svc.legal_redline',
      status: 'queued',
      playbook: 'Liability: cap at 2x annual fees.',
      instructions: 'Be brief.',
      summary: null,
      edits: null,
      diff: null,
    });
    await runVerticalWork(t);
    const done = (await api.get(`/v1/legal/redlines/${queued.body.id}`)).body;
    // The mock's edit replaces "original" by "proposed": the contract has the word once, on clause 4.
    expect(done).toMatchObject({ status: 'completed', summary: 'summary', unapplied_edits: 0 });
    expect(done.edits).toEqual([{ original: 'original', proposed: 'proposed', rationale: 'rationale', applied: true, not_applied: null, start: CONTRACT_TEXT.indexOf('original'), occurrences: 1 }]);
    expect(done.diff).toBe(
      [
        '--- a/msa.txt',
        '+++ b/msa.txt',
        '@@ -3,5 +3,5 @@',
        ' 1. Term. This Agreement starts on 1 March 2026 and runs for two (2) years.',
        ' 2. Payment. Invoices are payable within sixty (60) days of receipt.',
        ' 3. Governing law. This Agreement is governed by the laws of England and Wales.',
        '-4. Liability. The original liability cap is the fees paid in the prior 12 months.',
        '+4. Liability. The proposed liability cap is the fees paid in the prior 12 months.',
        ' 5. Notices. Notices are given in writing; a quote of this clause is not needed.',
        '',
      ].join('\n'),
    );
    expect((await auditOf(p.projectId, 'legal_redline.create'))[0].target_id).toBe(queued.body.id);
  });

  it('refuses a redline with neither playbook nor instructions, and repeated mapping field names (400)', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = as(p.secret);
    const c = await newContract(api, (await newMatter(api)).id);
    expectError(await api.post(`/v1/legal/contracts/${c.id}/redlines`, {}), 400, 'invalid_request', 'playbook');
    expectError(await api.post(`/v1/legal/contracts/${c.id}/mappings`, { fields: [{ name: 'a' }, { name: 'a' }] }), 400, 'invalid_request', 'fields[1].name');
    expectError(await api.post(`/v1/legal/contracts/${c.id}/mappings`, { fields: [] }), 400, 'invalid_request', 'fields');
    expectError(await api.post(`/v1/legal/contracts/${c.id}/mappings`, { fields: [{ name: 'a', type: 'date' }] }), 400, 'invalid_request');
  });
});

describe('scopes and isolation', () => {
  it('needs legal:write (+ inference:write for model work); legal:read reads; a dev:write key opens nothing (spec §5.6)', async () => {
    const p = await verticalProject(operator, LEGAL);
    const m = await newMatter(as(p.secret));
    const c = await newContract(as(p.secret), m.id);
    const map = (await as(p.secret).post(`/v1/legal/contracts/${c.id}/mappings`, { fields: [{ name: 'term' }] })).body;
    const key = async (scopes: string[]) => (await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('k'), scopes })).body.secret as string;
    const reader = as(await key(['legal:read']));
    for (const url of [`/v1/legal/matters`, `/v1/legal/matters/${m.id}`, `/v1/legal/matters/${m.id}/contracts`, `/v1/legal/contracts/${c.id}`, `/v1/legal/contracts/${c.id}/text`, `/v1/legal/contracts/${c.id}/mappings`, `/v1/legal/mappings/${map.id}`]) {
      expect({ url, status: (await reader.get(url)).status }).toEqual({ url, status: 200 });
    }
    await expectScopeRequired(reader, [
      { method: 'post', url: '/v1/legal/matters', body: { name: 'x' } },
      { method: 'post', url: `/v1/legal/matters/${m.id}/close`, body: {} },
      { method: 'post', url: `/v1/legal/matters/${m.id}/contracts`, body: { name: 'x', content: 'x' } },
      { method: 'post', url: `/v1/legal/contracts/${c.id}/mappings`, body: { fields: [{ name: 'term' }] } },
    ]);
    expectError(await reader.patch(`/v1/legal/matters/${m.id}`, { name: 'x' }), 403, 'insufficient_scope');

    const dev = as(await key(['dev:write', 'inference:write']));
    await expectScopeRequired(dev, [
      { method: 'get', url: '/v1/legal/matters' },
      { method: 'get', url: `/v1/legal/matters/${m.id}` },
      { method: 'post', url: '/v1/legal/matters', body: { name: 'x' } },
      { method: 'post', url: `/v1/legal/matters/${m.id}/contracts`, body: { name: 'x', content: 'x' } },
      { method: 'post', url: `/v1/legal/contracts/${c.id}/mappings`, body: { fields: [{ name: 'term' }] } },
      { method: 'post', url: `/v1/legal/contracts/${c.id}/redlines`, body: { instructions: 'x' } },
      { method: 'get', url: `/v1/legal/redlines/${map.id}` },
    ]);

    // legal:write alone writes matters and contracts, but model work also needs inference:write.
    const noInference = as(await key(['legal:write']));
    expect((await noInference.post('/v1/legal/matters', { name: 'y' })).status).toBe(200);
    expect((await noInference.post(`/v1/legal/matters/${m.id}/contracts`, { name: 'y', content: 'y' })).status).toBe(200);
    expectError(await noInference.post(`/v1/legal/contracts/${c.id}/mappings`, { fields: [{ name: 'term' }] }), 403, 'insufficient_scope');
    expectError(await noInference.post(`/v1/legal/contracts/${c.id}/redlines`, { instructions: 'x' }), 403, 'insufficient_scope');
    // A Legal key needs nothing of another vertical.
    expect((await as(p.secret).post(`/v1/legal/contracts/${c.id}/redlines`, { instructions: 'x' })).status).toBe(200);
  });

  it("hides another project's matters, contracts, mappings and redlines (404 not_found)", async () => {
    const a = await verticalProject(operator, LEGAL);
    const b = await verticalProject(operator, LEGAL);
    const api = as(a.secret);
    const m = await newMatter(api);
    const c = await newContract(api, m.id);
    const map = (await api.post(`/v1/legal/contracts/${c.id}/mappings`, { fields: [{ name: 'term' }] })).body;
    const red = (await api.post(`/v1/legal/contracts/${c.id}/redlines`, { instructions: 'x' })).body;
    await expectHiddenFrom(as(b.secret), [
      { method: 'get', url: `/v1/legal/matters/${m.id}` },
      { method: 'post', url: `/v1/legal/matters/${m.id}/close`, body: {} },
      { method: 'post', url: `/v1/legal/matters/${m.id}/contracts`, body: { name: 'x', content: 'x' } },
      { method: 'get', url: `/v1/legal/matters/${m.id}/contracts` },
      { method: 'get', url: `/v1/legal/contracts/${c.id}` },
      { method: 'get', url: `/v1/legal/contracts/${c.id}/text` },
      { method: 'post', url: `/v1/legal/contracts/${c.id}/mappings`, body: { fields: [{ name: 'term' }] } },
      { method: 'get', url: `/v1/legal/contracts/${c.id}/mappings` },
      { method: 'get', url: `/v1/legal/mappings/${map.id}` },
      { method: 'post', url: `/v1/legal/contracts/${c.id}/redlines`, body: { instructions: 'x' } },
      { method: 'get', url: `/v1/legal/contracts/${c.id}/redlines` },
      { method: 'get', url: `/v1/legal/redlines/${red.id}` },
      // Naming the other project in the body.
      { method: 'post', url: '/v1/legal/matters', body: { name: 'x', project_id: a.projectId } },
    ]);
    expectError(await as(b.secret).patch(`/v1/legal/matters/${m.id}`, { name: 'x' }), 404, 'not_found', 'matter_id');
    expectError(await uploadContract(t, b.secret, m.id, { name: 'x.txt', type: 'text/plain', data: 'x' }), 404, 'not_found', 'matter_id');
    // A mapping is not a redline, even in its own project.
    expectError(await api.get(`/v1/legal/redlines/${map.id}`), 404, 'not_found', 'redline_id');
    expect((await as(b.secret).get('/v1/legal/matters')).body.data).toEqual([]);
    expect((await api.get(`/v1/legal/matters/${m.id}`)).body.status).toBe('open');
  });
});
