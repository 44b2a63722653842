import { PDFDocument, StandardFonts } from 'pdf-lib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { indexNow, RAG_SCOPES, uploadFile } from './support.ts';

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

async function makePdf(lines: string[]): Promise<Buffer> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  const page = pdf.addPage([600, 800]);
  lines.forEach((line, i) => page.drawText(line, { x: 50, y: 750 - i * 20, size: 12, font }));
  return Buffer.from(await pdf.save());
}

describe('the indexing loop', () => {
  it('lets timers and requests run between documents (on the embedded database a loop of queries never would)', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    for (let i = 0; i < 3; i++) expect((await as(p.secret).post('/v1/rag/documents', { name: `d${i}`, content: `Document number ${i}.` })).status).toBe(200);
    const indexedWhenTimerRan: number[] = [];
    const indexed = () => t.deps.db.ragDocument.count({ where: { projectId: p.projectId, status: 'ready' } });
    let counting: Promise<void> | null = null;
    const timer = setInterval(() => (counting ??= indexed().then((n) => void indexedWhenTimerRan.push(n)).finally(() => (counting = null))), 0);
    try {
      expect(await indexNow(t)).toHaveLength(3);
    } finally {
      clearInterval(timer);
    }
    await counting;
    // The timer ran while documents were still being indexed, not only once the loop was over.
    expect(indexedWhenTimerRan.some((n) => n < 3)).toBe(true);
  });
});

describe('upload', () => {
  it('stores a JSON document as processing, then the worker makes it ready with chunks', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const api = as(p.secret);
    const res = await api.post('/v1/rag/documents', { name: 'handbook', content: 'The vacation policy grants 30 days a year.', metadata: { team: 'hr' } });
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^doc_/),
      object: 'svc.rag_document',
      project_id: p.projectId,
      name: 'handbook',
      bytes: 42,
      content_type: 'text/plain',
      chunks: 0,
      status: 'processing',
      error: null,
      metadata: { team: 'hr' },
      created_at: expect.any(Number),
    });
    expect(await indexNow(t)).toEqual([{ documentId: res.body.id, outcome: 'ready' }]);
    const got = await api.get(`/v1/rag/documents/${res.body.id}`);
    expect(got.body).toMatchObject({ status: 'ready', chunks: 1, error: null });
    // The text is kept sealed only until indexed; never in the logs.
    const row = await t.deps.db.ragDocument.findUnique({ where: { id: res.body.id } });
    expect(row!.contentSealed).toBeNull();
    expect(t.logs.text).not.toContain('vacation policy');
  });

  it('keeps the text sealed at rest while processing', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const res = await as(p.secret).post('/v1/rag/documents', { name: 'secret', content: 'The launch code is swordfish.' });
    const row = await t.deps.db.ragDocument.findUnique({ where: { id: res.body.id } });
    expect(row!.contentSealed).toBeTruthy();
    expect(row!.contentSealed).not.toContain('swordfish');
    await indexNow(t);
  });

  it('extracts text from a PDF file (multipart), made here with pdf-lib', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const pdf = await makePdf(['Quarterly report', 'Revenue grew by eleven percent in the northern region.']);
    const res = await uploadFile(t.app, p.secret, { name: 'report.pdf', type: 'application/pdf', data: pdf }, { name: 'Q3 report', metadata: '{"quarter":3}' });
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toMatchObject({ name: 'Q3 report', content_type: 'application/pdf', bytes: pdf.length, metadata: { quarter: 3 }, status: 'processing' });
    await indexNow(t);
    const q = await as(p.secret).post('/v1/rag/query', { query: 'northern revenue', mode: 'keyword' });
    expect(q.status, q.raw).toBe(200);
    expect(q.body.data[0]).toMatchObject({ object: 'svc.rag_chunk', document_id: res.body.id, metadata: { quarter: 3 } });
    expect(q.body.data[0].text).toContain('eleven percent');
  });

  it('indexes HTML as its text (no tags, no scripts)', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const html = '<html><head><style>.x{color:red}</style><script>var tracking = 1;</script></head><body><h1>Onboarding</h1><p>New hires receive a <b>laptop</b> on day one.</p></body></html>';
    const res = await uploadFile(t.app, p.secret, { name: 'onboarding.html', type: 'text/html', data: html });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.content_type).toBe('text/html');
    await indexNow(t);
    const q = await as(p.secret).post('/v1/rag/query', { query: 'laptop', mode: 'keyword' });
    expect(q.body.data).toHaveLength(1);
    expect(q.body.data[0].text).toContain('laptop on day one');
    expect(q.body.data[0].text).not.toMatch(/<|tracking|color/);
    const none = await as(p.secret).post('/v1/rag/query', { query: 'tracking', mode: 'keyword' });
    expect(none.body.data).toEqual([]);
  });

  it('indexes markdown (file by extension, and JSON content_type)', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const md = '# Deploys\n\nDeploys happen on **Tuesdays** after the standup.\n\n- never on Fridays';
    const file = await uploadFile(t.app, p.secret, { name: 'deploys.md', type: 'application/octet-stream', data: md });
    expect(file.status, file.raw).toBe(200);
    expect(file.body).toMatchObject({ name: 'deploys.md', content_type: 'text/markdown' });
    const json = await as(p.secret).post('/v1/rag/documents', { name: 'md', content: md, content_type: 'text/markdown' });
    expect(json.body.content_type).toBe('text/markdown');
    await indexNow(t);
    const q = await as(p.secret).post('/v1/rag/query', { query: 'tuesdays', mode: 'keyword' });
    expect(q.body.data.map((c: any) => c.document_id).sort()).toEqual([file.body.id, json.body.id].sort());
  });

  it('refuses a type it cannot index, a missing file and an empty text (400)', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    expectError(await uploadFile(t.app, p.secret, { name: 'x.bin', type: 'application/octet-stream', data: 'abc' }), 400, 'invalid_request', 'file');
    expectError(await as(p.secret).post('/v1/rag/documents', { name: 'x' }), 400, 'invalid_request', 'content');
    expectError(await as(p.secret).post('/v1/rag/documents', { name: 'x', content: '   ' }), 400, 'invalid_request', 'content');
    expectError(await as(p.secret).post('/v1/rag/documents', { name: 'x', content: 'a', content_type: 'application/pdf' }), 400, 'invalid_request', 'content_type');
    expectError(await uploadFile(t.app, p.secret, { name: 'bad.pdf', type: 'application/pdf', data: 'not a pdf' }), 400, 'invalid_request', 'file');
  });
});

describe('Idempotency-Key on a multipart upload', () => {
  it('replays the same file under the same key, and answers another file (or other fields) 409 idempotency_conflict', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const headers = { 'idempotency-key': `upload-${p.projectId}` };
    const file = { name: 'notes.txt', type: 'text/plain', data: 'The deploy window is Tuesday.' };
    const first = await uploadFile(t.app, p.secret, file, { name: 'notes' }, headers);
    expect(first.status, first.raw).toBe(200);
    const again = await uploadFile(t.app, p.secret, file, { name: 'notes' }, headers);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.id).toBe(first.body.id);
    // Nothing was stored twice.
    expect((await as(p.secret).get('/v1/rag/documents')).body.data.map((d: any) => d.id)).toEqual([first.body.id]);
    expectError(await uploadFile(t.app, p.secret, { ...file, data: 'The deploy window is Friday.' }, { name: 'notes' }, headers), 409, 'idempotency_conflict', 'Idempotency-Key');
    expectError(await uploadFile(t.app, p.secret, file, { name: 'other name' }, headers), 409, 'idempotency_conflict', 'Idempotency-Key');
    expect((await as(p.secret).get('/v1/rag/documents')).body.data).toHaveLength(1);
  });
});

describe('document_too_large', () => {
  const big = 'word '.repeat((2 * MB) / 5); // 2 MB

  it('refuses 2 MB on starter (413, param content / file) and accepts it on growth', async () => {
    const starter = await seedProject(operator, { scopes: RAG_SCOPES, plan: 'starter' });
    const json = await as(starter.secret).post('/v1/rag/documents', { name: 'big', content: big });
    expectError(json, 413, 'document_too_large', 'content');
    expect(json.body.error.message).toContain('1 MB');
    expectError(await uploadFile(t.app, starter.secret, { name: 'big.txt', type: 'text/plain', data: big }), 413, 'document_too_large', 'file');

    const growth = await seedProject(operator, { scopes: RAG_SCOPES, plan: 'growth' });
    const ok = await as(growth.secret).post('/v1/rag/documents', { name: 'big', content: big });
    expect(ok.status, ok.raw.slice(0, 300)).toBe(200);
    expect(ok.body.bytes).toBe(big.length);
    expect(big.length).toBeGreaterThan(2 * MB - 10);
    const okFile = await uploadFile(t.app, growth.secret, { name: 'big.txt', type: 'text/plain', data: big });
    expect(okFile.status, okFile.raw.slice(0, 300)).toBe(200);
    // The gateway's general body limit does not apply to this route: 2 MB passed it.
    expect(t.config.bodyLimitBytes).toBeLessThan(2 * MB);
    expect(await t.deps.db.ragDocument.count({ where: { projectId: starter.projectId } })).toBe(0);
  });

  it('answers a JSON body over every plan with document_too_large too', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES, plan: 'enterprise' });
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/rag/documents',
      headers: { authorization: `Bearer ${p.secret}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'huge', content: 'x'.repeat(52 * MB) }),
    });
    expectError({ status: res.statusCode, headers: res.headers, body: JSON.parse(res.body) } as any, 413, 'document_too_large', 'content');
  });
});

describe('list, get, delete', () => {
  it('lists newest first with the cursor, and deletes a document with its chunks at once', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const api = as(p.secret);
    const ids: string[] = [];
    for (const name of ['a', 'b', 'c']) ids.push((await api.post('/v1/rag/documents', { name, content: `penguin number ${name}` })).body.id);
    await indexNow(t);
    const page1 = await api.get('/v1/rag/documents', { query: { limit: 2 } });
    expect(page1.status, page1.raw).toBe(200);
    expect(page1.headers['x-svc-has-more']).toBe('true');
    expect(page1.body.data.map((d: any) => d.id)).toEqual([ids[2], ids[1]]);
    const page2 = await api.get('/v1/rag/documents', { query: { limit: 2, starting_after: ids[1]! } });
    expect(page2.body.data.map((d: any) => d.id)).toEqual([ids[0]]);
    expect(page2.body.has_more).toBe(false);

    const del = await api.delete(`/v1/rag/documents/${ids[1]}`);
    expect(del.status, del.raw).toBe(200);
    expect(del.body).toMatchObject({ id: ids[1], object: 'svc.rag_document', deleted: true });
    expect(await t.deps.db.ragChunk.count({ where: { documentId: ids[1] } })).toBe(0);
    const q = await api.post('/v1/rag/query', { query: 'penguin', mode: 'keyword', top_k: 10 });
    expect(q.body.data.map((c: any) => c.document_id).sort()).toEqual([ids[0], ids[2]].sort());
    expectError(await api.get(`/v1/rag/documents/${ids[1]}`), 404, 'not_found', 'document_id');
    expectError(await api.delete(`/v1/rag/documents/${ids[1]}`), 404, 'not_found', 'document_id');
    const audit = await operator.get('/v1/audit/events', { query: { project_id: p.projectId, action: 'rag_document.delete' } });
    expect(audit.body.data.map((a: any) => a.target_id)).toEqual([ids[1]]);
  });
});

describe('security', () => {
  it("hides another project's documents and chunks (404, empty results)", async () => {
    const a = await seedProject(operator, { scopes: RAG_SCOPES });
    const b = await seedProject(operator, { scopes: RAG_SCOPES });
    const doc = (await as(a.secret).post('/v1/rag/documents', { name: 'a', content: 'albatross migration routes' })).body;
    await indexNow(t);
    await expectHiddenFrom(as(b.secret), [
      { method: 'get', url: `/v1/rag/documents/${doc.id}` },
      { method: 'delete', url: `/v1/rag/documents/${doc.id}` },
      { method: 'get', url: `/v1/rag/documents?project_id=${a.projectId}` },
      { method: 'post', url: '/v1/rag/documents', body: { project_id: a.projectId, name: 'x', content: 'y' } },
      { method: 'post', url: '/v1/rag/query', body: { project_id: a.projectId, query: 'albatross' } },
      { method: 'post', url: '/v1/rag/query', body: { query: 'albatross', document_ids: [doc.id] } },
      { method: 'put', url: `/v1/projects/${a.projectId}/rag`, body: { embedding_model: 'mock-embed-1' } },
    ]);
    const list = await as(b.secret).get('/v1/rag/documents');
    expect(list.body.data).toEqual([]);
    const q = await as(b.secret).post('/v1/rag/query', { query: 'albatross', mode: 'keyword' });
    expect(q.body.data).toEqual([]);
  });

  it('needs rag:write (queries also inference:write)', async () => {
    const none = await seedProject(operator, { scopes: ['usage:read'] });
    await expectScopeRequired(as(none.secret), [
      { method: 'post', url: '/v1/rag/documents', body: { name: 'x', content: 'y' } },
      { method: 'get', url: '/v1/rag/documents' },
      { method: 'post', url: '/v1/rag/query', body: { query: 'x' } },
      { method: 'put', url: `/v1/projects/${none.projectId}/rag`, body: { embedding_model: null } },
    ]);
    const inference = await seedProject(operator, { scopes: ['inference:write'] });
    const q = await as(inference.secret).post('/v1/rag/query', { query: 'x' });
    expect(q.status, q.raw).toBe(200);
    expectError(await as(inference.secret).get('/v1/rag/documents'), 403, 'insufficient_scope');
  });
});
