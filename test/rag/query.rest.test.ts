import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { indexNow, RAG_SCOPES } from './support.ts';

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

const DOCS = {
  cats: 'Cats sleep for most of the day and hunt at dusk. A cat purrs when content.',
  rockets: 'Rockets burn liquid oxygen and kerosene. The second stage reaches orbit after eight minutes.',
  bread: 'Sourdough bread needs a starter, flour, water and salt, and a long cold proof overnight.',
};

async function projectWithDocs(opts: { model?: string | null } = {}) {
  const p = await seedProject(operator, { scopes: RAG_SCOPES });
  const api = as(p.secret);
  if (opts.model !== undefined) {
    const set = await api.put(`/v1/projects/${p.projectId}/rag`, { embedding_model: opts.model });
    expect(set.status, set.raw).toBe(200);
  }
  const ids: Record<string, string> = {};
  for (const [name, content] of Object.entries(DOCS)) ids[name] = (await api.post('/v1/rag/documents', { name, content })).body.id;
  await indexNow(t);
  return { ...p, api, ids };
}

async function usageCount(projectId: string, model: string) {
  await t.deps.outcomes.flush({ timeoutMs: 5_000 });
  return t.deps.db.usageRecord.count({ where: { projectId, model } });
}

describe('keyword query', () => {
  it('ranks by full text (ts_rank) and returns the list envelope of svc.rag_chunk', async () => {
    const p = await projectWithDocs();
    const res = await p.api.post('/v1/rag/query', { query: 'orbit rockets' });
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toEqual({
      object: 'list',
      data: [{ object: 'svc.rag_chunk', document_id: p.ids.rockets, chunk_id: expect.stringMatching(/^chk_/), text: DOCS.rockets, score: expect.any(Number), metadata: {} }],
      has_more: false,
      url: '/v1/rag/query',
    });
    expect(res.body.data[0].score).toBeGreaterThan(0);
    // websearch syntax: OR, and the stems (sleeping → sleep).
    const or = await p.api.post('/v1/rag/query', { query: 'sleeping or sourdough', top_k: 5 });
    expect(or.body.data.map((c: any) => c.document_id).sort()).toEqual([p.ids.cats, p.ids.bread].sort());
    const only = await p.api.post('/v1/rag/query', { query: 'sleeping or sourdough', document_ids: [p.ids.bread] });
    expect(only.body.data.map((c: any) => c.document_id)).toEqual([p.ids.bread]);
    const top1 = await p.api.post('/v1/rag/query', { query: 'sleeping or sourdough', top_k: 1 });
    expect(top1.body.data).toHaveLength(1);
    // A question in a sentence finds the chunk with its words; a chunk with all of them ranks above one with some.
    const question = await p.api.post('/v1/rag/query', { query: 'How long is the cold proof of sourdough bread?', top_k: 5 });
    expect(question.body.data.map((c: any) => c.document_id)).toEqual([p.ids.bread]);
    const partial = await p.api.post('/v1/rag/query', { query: 'cat stage', top_k: 5 });
    expect(partial.body.data).toHaveLength(2);
    const exclusion = await p.api.post('/v1/rag/query', { query: 'cat -stage', top_k: 5 });
    expect(exclusion.body.data[0].document_id).toBe(p.ids.cats);
    expect(exclusion.body.data[0].score).toBeGreaterThanOrEqual(1);
    // The excluded word's chunk is no full match: it only fills the rest, below 1.
    expect(exclusion.body.data.slice(1).map((c: any) => [c.document_id, c.score < 1])).toEqual([[p.ids.rockets, true]]);
    const stopwords = await p.api.post('/v1/rag/query', { query: 'the and of', top_k: 5 });
    expect(stopwords.status, stopwords.raw).toBe(200);
    expect(stopwords.body.data).toEqual([]);
  });

  it('refuses top_k outside 1..50, an unknown mode, and an unknown document id', async () => {
    const p = await projectWithDocs();
    expectError(await p.api.post('/v1/rag/query', { query: 'x', top_k: 0 }), 400, 'invalid_request', 'top_k');
    expectError(await p.api.post('/v1/rag/query', { query: 'x', top_k: 51 }), 400, 'invalid_request', 'top_k');
    expectError(await p.api.post('/v1/rag/query', { query: 'x', mode: 'fuzzy' }), 400, 'invalid_request', 'mode');
    expectError(await p.api.post('/v1/rag/query', { query: '' }), 400, 'invalid_request', 'query');
    expectError(await p.api.post('/v1/rag/query', { query: 'x', document_ids: ['doc_nope'] }), 404, 'not_found', 'document_ids');
  });

  it('refuses vector and hybrid without an embedding model (400, param mode)', async () => {
    const p = await projectWithDocs();
    for (const mode of ['vector', 'hybrid']) {
      const res = await p.api.post('/v1/rag/query', { query: 'cats', mode });
      expectError(res, 400, 'invalid_request', 'mode');
      expect(res.body.error.message).toContain('embedding model');
    }
  });
});

describe('embedding model', () => {
  it('refuses a chat model or an unknown model (400, param embedding_model)', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    expectError(await as(p.secret).put(`/v1/projects/${p.projectId}/rag`, { embedding_model: 'mock-1' }), 400, 'invalid_request', 'embedding_model');
    expectError(await as(p.secret).put(`/v1/projects/${p.projectId}/rag`, { embedding_model: 'nope' }), 400, 'invalid_request', 'embedding_model');
    const got = await as(p.secret).get(`/v1/projects/${p.projectId}/rag`);
    expect(got.body).toEqual({ object: 'svc.rag_settings', project_id: p.projectId, embedding_model: null, updated_at: null });
  });

  it('embeds chunks through the inference pipeline and answers vector and hybrid queries with mock-embed-1', async () => {
    const p = await projectWithDocs({ model: 'mock-embed-1' });
    const chunks = await t.deps.db.ragChunk.findMany({ where: { projectId: p.projectId } });
    expect(chunks.every((c) => c.embedding !== null && c.dims === 256)).toBe(true);
    // One embeddings call per document (usage records of mock-embed-1, as any /v1/embeddings call).
    expect(await usageCount(p.projectId, 'mock-embed-1')).toBe(3);

    // The mock's vectors are a function of the text: the same text is the nearest (cosine 1).
    const vector = await p.api.post('/v1/rag/query', { query: DOCS.bread, mode: 'vector', top_k: 3 });
    expect(vector.status, vector.raw).toBe(200);
    expect(vector.body.data).toHaveLength(3);
    expect(vector.body.data[0]).toMatchObject({ document_id: p.ids.bread });
    expect(vector.body.data[0].score).toBeCloseTo(1, 5);
    const scores = vector.body.data.map((c: any) => c.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);

    const hybrid = await p.api.post('/v1/rag/query', { query: DOCS.bread, mode: 'hybrid', top_k: 2 });
    expect(hybrid.body.data[0]).toMatchObject({ document_id: p.ids.bread });
    // Reciprocal rank fusion: first in both lists is 2/(60+1).
    expect(hybrid.body.data[0].score).toBeCloseTo(2 / 61, 10);
    // Without a mode: hybrid, as the project has a model.
    const byDefault = await p.api.post('/v1/rag/query', { query: DOCS.bread, top_k: 2 });
    expect(byDefault.body.data).toEqual(hybrid.body.data);
    // The queries' embeddings were charged and recorded too.
    expect(await usageCount(p.projectId, 'mock-embed-1')).toBe(6);

    // A deleted document leaves the vector results at once.
    await p.api.delete(`/v1/rag/documents/${p.ids.bread}`);
    const after = await p.api.post('/v1/rag/query', { query: DOCS.bread, mode: 'vector', top_k: 3 });
    expect(after.body.data.map((c: any) => c.document_id)).not.toContain(p.ids.bread);
    expect(after.body.data).toHaveLength(2);
  });

  it('re-embeds documents indexed before the model was set', async () => {
    const p = await projectWithDocs();
    const set = await p.api.put(`/v1/projects/${p.projectId}/rag`, { embedding_model: 'mock-embed-1' });
    expect(set.body).toMatchObject({ object: 'svc.rag_settings', embedding_model: 'mock-embed-1', updated_at: expect.any(Number) });
    expect((await p.api.get(`/v1/rag/documents/${p.ids.cats}`)).body.status).toBe('processing');
    await indexNow(t);
    expect((await p.api.get(`/v1/rag/documents/${p.ids.cats}`)).body).toMatchObject({ status: 'ready', chunks: 1 });
    const res = await p.api.post('/v1/rag/query', { query: DOCS.cats, mode: 'vector', top_k: 1 });
    expect(res.body.data[0].document_id).toBe(p.ids.cats);
  });

  it('fails a document whose embeddings are refused by the budget, with the error', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES, budgetUsd: 0 });
    await as(p.secret).put(`/v1/projects/${p.projectId}/rag`, { embedding_model: 'mock-embed-1' });
    const doc = (await as(p.secret).post('/v1/rag/documents', { name: 'x', content: 'anything at all' })).body;
    expect(await indexNow(t)).toEqual([{ documentId: doc.id, outcome: 'failed' }]);
    const got = (await as(p.secret).get(`/v1/rag/documents/${doc.id}`)).body;
    expect(got).toMatchObject({ status: 'failed', chunks: 0 });
    expect(got.error).toMatch(/^budget_exceeded: /);
  });
});

describe('rate limits while indexing', () => {
  it('waits for the token window (Retry-After) instead of failing, then indexes', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES, limits: { requests_per_minute: 1000, tokens_per_minute: 3, burst: 0 } });
    await as(p.secret).put(`/v1/projects/${p.projectId}/rag`, { embedding_model: 'mock-embed-1' });
    // The first embeddings call may take the whole (empty) window (a take larger than a window is cut to it); the next waits.
    const first = (await as(p.secret).post('/v1/rag/documents', { name: 'x', content: 'Seven hungry otters share a very large fish.' })).body;
    const doc = (await as(p.secret).post('/v1/rag/documents', { name: 'y', content: 'Nine sleepy seals nap on a warm rock.' })).body;
    expect(await indexNow(t)).toEqual([
      { documentId: first.id, outcome: 'ready' },
      { documentId: doc.id, outcome: 'retry' },
    ]);
    const row = await t.deps.db.ragDocument.findUnique({ where: { id: doc.id } });
    expect(row).toMatchObject({ status: 'processing', leaseUntil: null, attempts: 1 });
    expect(row!.nextAttemptAt.getTime()).toBeGreaterThan(t.clock.now());
    expect(await indexNow(t)).toEqual([]);
    // A wider window, and time for the retry: indexed.
    await operator.put(`/v1/projects/${p.projectId}/rate-limits`, { requests_per_minute: 1000, tokens_per_minute: 100_000, burst: 0 });
    t.clock.advance(row!.nextAttemptAt.getTime() - t.clock.now());
    expect(await indexNow(t)).toEqual([{ documentId: doc.id, outcome: 'ready' }]);
  });
});

describe('restart', () => {
  it('picks up a document a crashed worker left processing once its lease has expired', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const doc = (await as(p.secret).post('/v1/rag/documents', { name: 'crash', content: 'A walrus can weigh two tonnes.' })).body;
    // A worker claims it and dies before finishing: its lease stays on the row.
    const leaseUntil = new Date(t.clock.now() + 60_000);
    await t.deps.db.ragDocument.update({ where: { id: doc.id }, data: { leaseUntil, attempts: 1 } });

    // A restarted gateway on the same database: nothing is due while the lease holds, the document is indexed after.
    const second = await buildTestApp({ database: { database: t.deps.database, url: null, drop: async () => {} }, clock: t.clock });
    try {
      expect(await indexNow(second)).toEqual([]);
      t.clock.advance(61_000);
      expect(await indexNow(second)).toEqual([{ documentId: doc.id, outcome: 'ready' }]);
    } finally {
      await second.close();
    }
    const got = (await as(p.secret).get(`/v1/rag/documents/${doc.id}`)).body;
    expect(got).toMatchObject({ status: 'ready', chunks: 1 });
    const q = await as(p.secret).post('/v1/rag/query', { query: 'walrus', mode: 'keyword' });
    expect(q.body.data.map((c: any) => c.document_id)).toEqual([doc.id]);
  });

  it("lets a worker whose lease was taken over not overwrite the other's result", async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const doc = (await as(p.secret).post('/v1/rag/documents', { name: 'twice', content: 'Narwhals have one long tooth.' })).body;
    expect(await indexNow(t)).toEqual([{ documentId: doc.id, outcome: 'ready' }]);
    expect(await t.deps.db.ragChunk.count({ where: { documentId: doc.id } })).toBe(1);
    expect(await indexNow(t)).toEqual([]);
  });
});
