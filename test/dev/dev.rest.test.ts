import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import type { Receiver } from '../helpers/https-receiver.ts';
import { uniqueName } from '../helpers/services.ts';
import { deliver, receiverFor, runVerticalWork, verticalProject } from '../verticals/support.ts';
import { webhookEnv } from '../webhooks/support.ts';
import { DEV, DIFF, FILES, indexNow, readyRepository } from './support.ts';

let t: TestApp;
let operator: Client;
const receivers: Receiver[] = [];

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t.close();
});

const as = (secret: string) => client(t.app, secret);
const KB = 1024;

async function auditActions(projectId: string) {
  const audit = await operator.get('/v1/audit/events', { query: { project_id: projectId, limit: 100 } });
  return audit.body.data.map((a: any) => a.action) as string[];
}

describe('repositories', () => {
  it('is indexing until its posted files are indexed through RAG, then ready; updates and lists; audits each write', async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const created = await api.post('/v1/dev/repositories', { name: 'acme/shop', git_host: 'github' });
    expect(created.status, created.raw).toBe(200);
    expect(created.body).toMatchObject({
      object: 'svc.dev_repository',
      project_id: p.projectId,
      name: 'acme/shop',
      git_host: 'github',
      comments_allowed: true,
      default_branch: 'main',
      status: 'indexing',
      files: 0,
      file_counts: { indexing: 0, ready: 0, failed: 0 },
      error: null,
    });
    expect(created.body.id).toMatch(/^rep_/);
    const id = created.body.id;
    // Another host: a Git app comments only when told it may.
    expect((await api.post('/v1/dev/repositories', { name: 'internal/tools' })).body).toMatchObject({ git_host: 'other', comments_allowed: false });

    const posted = await api.post(`/v1/dev/repositories/${id}/files`, { files: FILES });
    expect(posted.status, posted.raw).toBe(200);
    expect(posted.body).toMatchObject({ id, status: 'indexing', files: 3, file_counts: { indexing: 3, ready: 0, failed: 0 } });
    const files = await api.get(`/v1/dev/repositories/${id}/files`);
    expect(files.body.data.map((f: any) => [f.path, f.status]).sort()).toEqual(FILES.map((f) => [f.path, 'indexing']).sort());
    expect(files.body.data[0]).toMatchObject({ object: 'svc.dev_repository_file', repository_id: id });
    expect(files.body.data[0].sha256).toMatch(/^[0-9a-f]{64}$/);

    expect((await indexNow(t)).map((d) => d.outcome)).toEqual(['ready', 'ready', 'ready']);
    const ready = await api.get(`/v1/dev/repositories/${id}`);
    expect(ready.body).toMatchObject({ status: 'ready', files: 3, file_counts: { indexing: 0, ready: 3, failed: 0 } });
    const indexed = (await api.get(`/v1/dev/repositories/${id}/files`)).body.data;
    expect(indexed.every((f: any) => f.status === 'ready' && f.chunks >= 1)).toBe(true);

    // The same content again is left as it is; a changed file is indexed again; replace drops the files not posted.
    expect((await api.post(`/v1/dev/repositories/${id}/files`, { files: FILES })).body).toMatchObject({ status: 'ready', files: 3 });
    const changed = await api.post(`/v1/dev/repositories/${id}/files`, { files: [{ path: 'README.md', content: '# Shop\n\nNow with gift cards.' }] });
    expect(changed.body).toMatchObject({ status: 'indexing', files: 3, file_counts: { indexing: 1, ready: 2 } });
    const replaced = await api.post(`/v1/dev/repositories/${id}/files`, { files: [FILES[0]], replace: true });
    expect(replaced.body).toMatchObject({ files: 1, status: 'ready' });
    expect((await api.get(`/v1/dev/repositories/${id}/files`)).body.data.map((f: any) => f.path)).toEqual([FILES[0]!.path]);
    // The replaced and removed files' documents and chunks are gone at once.
    expect(await t.deps.db.ragDocument.count({ where: { repositoryId: id } })).toBe(1);

    const updated = await api.patch(`/v1/dev/repositories/${id}`, { comments_allowed: false, default_branch: 'trunk' });
    expect(updated.body).toMatchObject({ comments_allowed: false, default_branch: 'trunk', git_host: 'github', status: 'ready' });
    const list = await api.get('/v1/dev/repositories', { query: { limit: 1 } });
    expect(list.body).toMatchObject({ object: 'list', url: '/v1/dev/repositories', has_more: true });
    expect(list.headers['x-svc-page-limit']).toBe('1');
    expect(list.body.data.map((r: any) => r.name)).toEqual(['internal/tools']);
    const older = await api.get('/v1/dev/repositories', { query: { starting_after: list.body.data[0].id } });
    expect(older.body.data.map((r: any) => [r.id, r.status])).toEqual([[id, 'ready']]);

    expect(await auditActions(p.projectId)).toEqual(
      expect.arrayContaining(['dev_repository.create', 'dev_repository.index', 'dev_repository.update']),
    );
    const index = await t.deps.db.auditEvent.findFirstOrThrow({ where: { projectId: p.projectId, action: 'dev_repository.index' }, orderBy: { id: 'asc' } });
    expect(index).toMatchObject({ targetId: id, actorKeyId: p.keyId, data: { posted: 3, unchanged: 0 } });
    expect(JSON.stringify(index.data)).not.toContain('refund below fee');
  });

  it('is failed when a file fails to index (here: the key that posted it was revoked), until the file is posted again', async () => {
    const p = await verticalProject(operator, DEV);
    // With an embedding model, indexing embeds as the key that posted the files.
    expect((await operator.put(`/v1/projects/${p.projectId}/rag`, { embedding_model: 'mock-embed-1' })).status).toBe(200);
    const poster = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('ci'), scopes: DEV });
    const repo = (await as(p.secret).post('/v1/dev/repositories', { name: 'acme/shop', git_host: 'gitlab' })).body;
    await as(poster.body.secret).post(`/v1/dev/repositories/${repo.id}/files`, { files: FILES.slice(0, 2) });
    await operator.post(`/v1/keys/${poster.body.id}/revoke`);
    expect((await indexNow(t)).map((d) => d.outcome)).toEqual(['failed', 'failed']);
    const failed = (await as(p.secret).get(`/v1/dev/repositories/${repo.id}`)).body;
    expect(failed).toMatchObject({ status: 'failed', file_counts: { failed: 2, ready: 0 } });
    expect(failed.error).toMatch(/^(src\/payments\/refund\.ts|README\.md): invalid_api_key: /);
    expectError(await as(p.secret).post(`/v1/dev/repositories/${repo.id}/questions`, { question: 'How are refunds computed?' }), 409, 'repository_not_indexed', 'repository_id');

    // Unchanged content that failed is indexed again when posted again (by an active key).
    expect((await as(p.secret).post(`/v1/dev/repositories/${repo.id}/files`, { files: FILES.slice(0, 2) })).body).toMatchObject({ status: 'indexing' });
    expect((await indexNow(t)).map((d) => d.outcome)).toEqual(['ready', 'ready']);
    expect((await as(p.secret).get(`/v1/dev/repositories/${repo.id}`)).body).toMatchObject({ status: 'ready', error: null });
    const chunks = await t.deps.db.ragChunk.findMany({ where: { repositoryId: repo.id } });
    expect(chunks.length).toBeGreaterThan(0);
    expect(chunks.every((c) => c.embedding !== null)).toBe(true);
  });

  it("bounds each file by the plan's document limit (413 document_too_large) and refuses bad paths", async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const repo = (await api.post('/v1/dev/repositories', { name: 'big' })).body;
    const mb = 1024 * 1024;
    const over = await api.post(`/v1/dev/repositories/${repo.id}/files`, { files: [FILES[0], { path: 'data/big.json', content: 'x'.repeat(mb + 1) }] });
    expectError(over, 413, 'document_too_large', 'files[1].content');
    expect((await api.post(`/v1/dev/repositories/${repo.id}/files`, { files: [{ path: 'data/ok.json', content: 'x'.repeat(mb) }] })).status).toBe(200);
    const growth = await verticalProject(operator, DEV, 'growth');
    const g = (await as(growth.secret).post('/v1/dev/repositories', { name: 'big' })).body;
    expect((await as(growth.secret).post(`/v1/dev/repositories/${g.id}/files`, { files: [{ path: 'data/big.json', content: 'x'.repeat(mb + 1) }] })).status).toBe(200);

    expectError(await api.post(`/v1/dev/repositories/${repo.id}/files`, { files: [FILES[0], FILES[0]] }), 400, 'invalid_request', 'files[1].path');
    for (const path of ['/etc/passwd', '../secret', 'src/../x', 'src//x', 'src/', '']) {
      expectError(await api.post(`/v1/dev/repositories/${repo.id}/files`, { files: [{ path, content: 'x' }] }), 400, 'invalid_request', 'files[0].path');
    }
    // Binary content (NUL) is refused, as in every text field of the API.
    expectError(await api.post(`/v1/dev/repositories/${repo.id}/files`, { files: [{ path: 'a.bin', content: 'a\u0000b' }] }), 400, 'invalid_request', 'files');
    expectError(await api.post(`/v1/dev/repositories/${repo.id}/files`, { files: [] }), 400, 'invalid_request', 'files');
    expectError(await api.post('/v1/dev/repositories', { name: 'x', git_host: 'sourceforge' }), 400, 'invalid_request', 'git_host');
  });

  it("keeps a repository's files out of the project's RAG documents and queries, and the project's documents out of its Q&A", async () => {
    const p = await verticalProject(operator, [...DEV, 'rag:write']);
    const api = as(p.secret);
    const doc = await api.post('/v1/rag/documents', { name: 'handbook', content: 'Refunds are approved by the finance team within five days.' });
    const repo = await readyRepository(t, api);
    await indexNow(t);
    const docs = await api.get('/v1/rag/documents');
    expect(docs.body.data.map((d: any) => d.id)).toEqual([doc.body.id]);
    const query = await api.post('/v1/rag/query', { query: 'refund fee' });
    expect(query.body.data.map((c: any) => c.document_id)).toEqual([doc.body.id]);
    const fileDoc = await t.deps.db.ragDocument.findFirstOrThrow({ where: { repositoryId: repo.id } });
    expectError(await api.get(`/v1/rag/documents/${fileDoc.id}`), 404, 'not_found');
    expectError(await api.post('/v1/rag/query', { query: 'refund', document_ids: [fileDoc.id] }), 404, 'not_found', 'document_ids');
    const asked = await api.post(`/v1/dev/repositories/${repo.id}/questions`, { question: 'How are refunds approved?' });
    expect(asked.body.citations.length).toBeGreaterThan(0);
    expect(asked.body.citations.every((c: any) => FILES.some((f) => f.path === c.path))).toBe(true);
  });
});

describe('questions', () => {
  it('answers from the files through the inference pipeline, with file citations; 409 repository_not_indexed while indexing', async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const repo = (await api.post('/v1/dev/repositories', { name: 'acme/shop' })).body;
    expectError(await api.post(`/v1/dev/repositories/${repo.id}/questions`, { question: 'How are refunds computed?' }), 409, 'repository_not_indexed', 'repository_id');
    await api.post(`/v1/dev/repositories/${repo.id}/files`, { files: FILES });
    const indexing = await api.post(`/v1/dev/repositories/${repo.id}/questions`, { question: 'How are refunds computed?' });
    expectError(indexing, 409, 'repository_not_indexed', 'repository_id');
    expect(indexing.body.error.message).toContain('0 of 3 files ready');
    await indexNow(t);

    const asked = await api.post(`/v1/dev/repositories/${repo.id}/questions`, { question: 'How is the refund fee computed?', top_k: 2 });
    expect(asked.status, asked.raw).toBe(200);
    expect(asked.body).toMatchObject({
      object: 'svc.dev_answer',
      project_id: p.projectId,
      repository_id: repo.id,
      question: 'How is the refund fee computed?',
      // The built-in mock echoes the question.
      answer: 'How is the refund fee computed?',
      model: 'mock-1',
      template_id: null,
    });
    expect(asked.body.id).toMatch(/^inf_/);
    expect(asked.body.citations).toHaveLength(2);
    expect(asked.body.citations[0]).toMatchObject({ source: 1, path: 'src/payments/refund.ts' });
    expect(asked.body.citations[0].chunk_id).toMatch(/^chk_/);
    expect(asked.body.citations[0].text).toContain('refundAmount');
    expect(asked.body.citations.map((c: any) => c.path)).toContain('README.md');
    expect(asked.body.usage.total_tokens).toBeGreaterThan(0);
    expect(asked.headers['x-svc-ratelimit-resource']).toBeDefined();

    // One inference of the pipeline: its usage record (the sources went to the model in the prompt).
    await t.deps.outcomes.flush();
    const usage = await t.deps.db.usageRecord.findFirstOrThrow({ where: { requestId: asked.body.request_id } });
    expect(usage).toMatchObject({ projectId: p.projectId, keyId: p.keyId, status: 'succeeded' });
    expect(usage.promptTokens).toBeGreaterThan(30);
    const audit = await t.deps.db.auditEvent.findFirstOrThrow({ where: { projectId: p.projectId, action: 'dev_question.create' } });
    expect(audit).toMatchObject({ targetId: repo.id, data: { inference_id: asked.body.id, citations: 2 } });
  });
});

describe('reviews', () => {
  it("caps the diff by the plan in bytes: starter 200 KB, growth 1 MB (409 diff_too_large, param diff)", async () => {
    const starter = await verticalProject(operator, DEV);
    const repo = (await as(starter.secret).post('/v1/dev/repositories', { name: 'r' })).body;
    const review = (secret: string, repository_id: string, diff: string) => as(secret).post('/v1/dev/reviews', { repository_id, diff });
    // Bytes, not characters: é is two bytes of UTF-8.
    expect((await review(starter.secret, repo.id, 'é'.repeat(100 * KB))).status).toBe(200);
    const over = await review(starter.secret, repo.id, `${'é'.repeat(100 * KB)}x`);
    expectError(over, 409, 'diff_too_large', 'diff');
    expect(over.body.error.message).toContain('204801 bytes');
    expectError(await as(starter.secret).post('/v1/dev/pull-requests/summaries', { title: 't', diff: 'x'.repeat(200 * KB + 1) }), 409, 'diff_too_large', 'diff');

    const growth = await verticalProject(operator, DEV, 'growth');
    const g = (await as(growth.secret).post('/v1/dev/repositories', { name: 'r' })).body;
    expect((await review(growth.secret, g.id, 'x'.repeat(200 * KB + 1))).status).toBe(200);
    expect((await review(growth.secret, g.id, 'x'.repeat(1024 * KB))).status).toBe(200);
    expectError(await review(growth.secret, g.id, 'x'.repeat(1024 * KB + 1)), 409, 'diff_too_large', 'diff');
    // A body over every plan's cap is refused before it is read whole, with the same code.
    expectError(await review(growth.secret, g.id, 'x'.repeat(11 * 1024 * KB + 1)), 409, 'diff_too_large', 'diff');
    expect(await t.deps.db.devTask.count({ where: { projectId: { in: [starter.projectId, growth.projectId] } } })).toBe(3);
  });

  it('refuses post_comments on a repository whose comments_allowed is false (403 git_host_forbidden)', async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const closed = (await api.post('/v1/dev/repositories', { name: 'r', git_host: 'github', comments_allowed: false })).body;
    const forbidden = await api.post('/v1/dev/reviews', { repository_id: closed.id, diff: DIFF, post_comments: true });
    expectError(forbidden, 403, 'git_host_forbidden', 'post_comments');
    const other = (await api.post('/v1/dev/repositories', { name: 'r', git_host: 'other' })).body;
    expectError(await api.post('/v1/dev/reviews', { repository_id: other.id, diff: DIFF, post_comments: true }), 403, 'git_host_forbidden', 'post_comments');
    expect((await api.post('/v1/dev/reviews', { repository_id: closed.id, diff: DIFF })).body).toMatchObject({ status: 'queued', post_comments: false });
    await api.patch(`/v1/dev/repositories/${closed.id}`, { comments_allowed: true });
    expect((await api.post('/v1/dev/reviews', { repository_id: closed.id, diff: DIFF, post_comments: true })).body).toMatchObject({ post_comments: true });
    expectError(await api.post('/v1/dev/reviews', { repository_id: 'rep_nope', diff: DIFF }), 404, 'not_found', 'repository_id');
  });

  it('reviews a diff in the background: summary and line comments, dev.review.completed with the comments when post_comments', async () => {
    await runVerticalWork(t); // what earlier tests left queued
    const p = await verticalProject(operator, DEV);
    const r = await receiverFor(operator, p.projectId, ['dev.review.completed']);
    receivers.push(r);
    const api = as(p.secret);
    const repo = await readyRepository(t, api);
    const posted = await api.post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF, title: 'Refund zero totals', post_comments: true });
    expect(posted.status, posted.raw).toBe(200);
    expect(posted.body).toMatchObject({
      object: 'svc.dev_review',
      project_id: p.projectId,
      repository_id: repo.id,
      title: 'Refund zero totals',
      status: 'queued',
      post_comments: true,
      diff_bytes: Buffer.byteLength(DIFF),
      summary: null,
      comments: [],
      completed_at: null,
    });
    expect(posted.body.id).toMatch(/^rev_/);
    expect(posted.body).not.toHaveProperty('diff');
    const quiet = (await api.post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF })).body;
    expect(await runVerticalWork(t)).toEqual(['succeeded', 'succeeded']);

    const done = (await api.get(`/v1/dev/reviews/${posted.body.id}`)).body;
    expect(done.status).toBe('completed');
    expect(typeof done.summary).toBe('string');
    expect(done.comments.length).toBeGreaterThan(0);
    for (const c of done.comments) {
      expect(Object.keys(c).sort()).toEqual(['body', 'line', 'path', 'severity']);
      expect(Number.isInteger(c.line) && c.line >= 1).toBe(true);
      expect(['info', 'minor', 'major', 'critical']).toContain(c.severity);
    }
    const events = await deliver(t, r, 2);
    const byId = Object.fromEntries(events.map((e) => [e.data.review_id, e]));
    expect(byId[posted.body.id]).toMatchObject({
      type: 'dev.review.completed',
      project_id: p.projectId,
      data: { review_id: posted.body.id, repository_id: repo.id, status: 'completed', comment_count: done.comments.length, post_comments: true, comments: done.comments, summary: done.summary },
    });
    expect(byId[quiet.id].data).toEqual({ review_id: quiet.id, repository_id: repo.id, status: 'completed', title: null, comment_count: done.comments.length, post_comments: false });

    // The review went through the pipeline as the key that asked, with the diff and the repository's related code.
    const job = await t.deps.db.verticalJob.findFirstOrThrow({ where: { subjectId: posted.body.id } });
    expect(job).toMatchObject({ kind: 'dev.review', keyId: p.keyId, status: 'succeeded' });
    const list = await api.get('/v1/dev/reviews', { query: { repository_id: repo.id, status: 'completed' } });
    expect(list.body.data.map((x: any) => x.id)).toEqual([quiet.id, posted.body.id]);
    expect(await auditActions(p.projectId)).toContain('dev_review.create');
  });

  it('a review that fails (the key was revoked meanwhile) ends failed, and dev.review.completed says so', async () => {
    const p = await verticalProject(operator, DEV);
    const r = await receiverFor(operator, p.projectId, ['dev.review.completed']);
    receivers.push(r);
    const key = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('ci'), scopes: DEV });
    const repo = (await as(p.secret).post('/v1/dev/repositories', { name: 'r' })).body;
    const review = (await as(key.body.secret).post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF })).body;
    await operator.post(`/v1/keys/${key.body.id}/revoke`);
    expect(await runVerticalWork(t)).toEqual(['failed']);
    const failed = (await as(p.secret).get(`/v1/dev/reviews/${review.id}`)).body;
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'invalid_api_key' }, comments: [] });
    const [event] = await deliver(t, r, 1);
    expect(event!.data).toMatchObject({ review_id: review.id, status: 'failed', comment_count: 0, error: { code: 'invalid_api_key' } });
    expect(event!.data).not.toHaveProperty('comments');
  });
});

describe('idempotency', () => {
  it('replays a review and a question under the same Idempotency-Key without queuing or asking again', async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const repo = await readyRepository(t, api);
    const body = { repository_id: repo.id, diff: DIFF, title: 'Once' };
    const first = await api.post('/v1/dev/reviews', body, { headers: { 'idempotency-key': 'review-1' } });
    const again = await api.post('/v1/dev/reviews', body, { headers: { 'idempotency-key': 'review-1' } });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await t.deps.db.devTask.count({ where: { projectId: p.projectId } })).toBe(1);
    expectError(await api.post('/v1/dev/reviews', { ...body, title: 'Twice' }, { headers: { 'idempotency-key': 'review-1' } }), 409, 'idempotency_conflict');

    const question = { question: 'What does refundAmount return?' };
    const asked = await api.post(`/v1/dev/repositories/${repo.id}/questions`, question, { headers: { 'idempotency-key': 'q-1' } });
    const replay = await api.post(`/v1/dev/repositories/${repo.id}/questions`, question, { headers: { 'idempotency-key': 'q-1' } });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(asked.body.id);
    await t.deps.outcomes.flush();
    expect(await t.deps.db.usageRecord.count({ where: { projectId: p.projectId } })).toBe(1);
  });
});

describe('pull-request summaries', () => {
  it('summarizes in the background, with or without a repository; dev.pull_request.summarized reaches a receiver', async () => {
    const p = await verticalProject(operator, DEV);
    const r = await receiverFor(operator, p.projectId, ['dev.pull_request.summarized']);
    receivers.push(r);
    const api = as(p.secret);
    const repo = (await api.post('/v1/dev/repositories', { name: 'acme/shop' })).body;
    const a = await api.post('/v1/dev/pull-requests/summaries', { repository_id: repo.id, title: 'Refund zero totals', description: 'Fixes #12', diff: DIFF });
    expect(a.status, a.raw).toBe(200);
    expect(a.body).toMatchObject({ object: 'svc.dev_pull_request_summary', repository_id: repo.id, title: 'Refund zero totals', description: 'Fixes #12', status: 'queued', summary: null, changes: [], risk: null });
    expect(a.body.id).toMatch(/^prs_/);
    const b = (await api.post('/v1/dev/pull-requests/summaries', { title: 'Loose', diff: DIFF })).body;
    expect(b.repository_id).toBeNull();
    await runVerticalWork(t);
    const done = (await api.get(`/v1/dev/pull-requests/summaries/${a.body.id}`)).body;
    expect(done).toMatchObject({ status: 'completed', risk: expect.stringMatching(/^(low|medium|high)$/) });
    expect(typeof done.summary).toBe('string');
    expect(done.changes[0]).toEqual({ path: expect.any(String), description: expect.any(String) });
    const events = await deliver(t, r, 2);
    expect(events.map((e) => e.type)).toEqual(['dev.pull_request.summarized', 'dev.pull_request.summarized']);
    expect(events.find((e) => e.data.summary_id === a.body.id)!.data).toEqual({
      summary_id: a.body.id,
      repository_id: repo.id,
      status: 'completed',
      title: 'Refund zero totals',
      summary: done.summary,
      risk: done.risk,
    });
    expect((await api.get('/v1/dev/pull-requests/summaries')).body.data.map((x: any) => x.id)).toEqual([b.id, a.body.id]);
    expect(await auditActions(p.projectId)).toContain('dev_pull_request_summary.create');
  });
});

describe('tests', () => {
  it("generates a test file from the repository's file; a path the repository lacks is 404 not_found, param path", async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const repo = await readyRepository(t, api);
    expectError(await api.post('/v1/dev/tests', { repository_id: repo.id, path: 'src/nope.ts' }), 404, 'not_found', 'path');
    const asked = await api.post('/v1/dev/tests', { repository_id: repo.id, path: 'src/payments/refund.ts', framework: 'vitest', instructions: 'Cover the fee edge case.' });
    expect(asked.status, asked.raw).toBe(200);
    expect(asked.body).toMatchObject({
      object: 'svc.dev_test_generation',
      repository_id: repo.id,
      path: 'src/payments/refund.ts',
      framework: 'vitest',
      instructions: 'Cover the fee edge case.',
      status: 'queued',
      test_file: null,
    });
    expect(asked.body.id).toMatch(/^tst_/);
    expect(await runVerticalWork(t)).toEqual(['succeeded']);
    const done = (await api.get(`/v1/dev/tests/${asked.body.id}`)).body;
    expect(done.status).toBe('completed');
    expect(done.test_file).toEqual({ path: expect.any(String), content: expect.any(String) });
    expect(typeof done.notes).toBe('string');
    expect((await api.get('/v1/dev/tests', { query: { repository_id: repo.id } })).body.data.map((x: any) => x.id)).toEqual([asked.body.id]);
    expect(await auditActions(p.projectId)).toContain('dev_test.create');
  });
});
