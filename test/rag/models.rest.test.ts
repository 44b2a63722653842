import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { indexNow, RAG_SCOPES } from './support.ts';

/**
 * CONTRACT §22 through RAG: the project's embedding model (PUT /v1/projects/{id}/rag, not chosen by the caller) runs
 * as the caller's key when a document is indexed and when a search embeds its query. A key whose model list leaves
 * that model out is refused as on /v1/embeddings (403 insufficient_scope, param model); keyword search runs no model.
 */

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  // The built-in mock provider: mock-1 (chat) and mock-embed-1 (embedding).
  t = await buildTestApp();
  operator = client(t.app);
}, 240_000);
afterAll(async () => {
  await t?.close();
});

async function setup() {
  const p = await seedProject(operator, { scopes: [...RAG_SCOPES, 'keys:manage'] });
  const admin = client(t.app, p.secret);
  expect((await admin.put(`/v1/projects/${p.projectId}/rag`, { embedding_model: 'mock-embed-1' })).status).toBe(200);
  const doc = await admin.post('/v1/rag/documents', { name: 'cats', content: 'Cats sleep for most of the day and hunt at dusk.' });
  expect(doc.status, doc.raw).toBe(200);
  await indexNow(t);
  const key = async (models: string[]) => {
    const res = await admin.post('/v1/keys', { project_id: p.projectId, name: `k-${models.join('-')}-${Math.random()}`, scopes: ['rag:write', 'inference:write'], models });
    expect(res.status, res.raw).toBe(200);
    return client(t.app, res.body.secret);
  };
  return { ...p, admin, chatOnly: await key(['mock-1']), withEmbed: await key(['mock-1', 'mock-embed-1']), byProvider: await key(['mock/*']) };
}

describe("RAG and a key's model list", () => {
  it('403 insufficient_scope param model: a search that embeds its query with a model outside the list; keyword search passes', { timeout: 120_000 }, async () => {
    const p = await setup();
    const refused = await p.chatOnly.post('/v1/rag/query', { query: 'when do cats hunt?' });
    expectError(refused, 403, 'insufficient_scope', 'model');
    expect(refused.body.error.message).toContain('mock-embed-1');
    expectError(await p.chatOnly.post('/v1/rag/query', { query: 'when do cats hunt?', mode: 'vector' }), 403, 'insufficient_scope', 'model');
    const keyword = await p.chatOnly.post('/v1/rag/query', { query: 'cats hunt', mode: 'keyword' });
    expect(keyword.status, keyword.raw).toBe(200);
    expect(keyword.body.data.length).toBeGreaterThan(0);
    for (const allowed of [p.withEmbed, p.byProvider]) {
      const res = await allowed.post('/v1/rag/query', { query: 'when do cats hunt?' });
      expect(res.status, res.raw).toBe(200);
      expect(res.body.data.length).toBeGreaterThan(0);
    }
  });

  it('403 insufficient_scope param model: inference with `rag` whose retrieval would embed with a model outside the list', { timeout: 120_000 }, async () => {
    const p = await setup();
    const body = { model: 'mock-1', messages: [{ role: 'user', content: 'When do cats hunt?' }], rag: {} };
    const refused = await p.chatOnly.post('/v1/chat/completions', body);
    expectError(refused, 403, 'insufficient_scope', 'model');
    expect(refused.body.error.message).toContain('mock-embed-1');
    const ok = await p.withEmbed.post('/v1/chat/completions', body);
    expect(ok.status, ok.raw).toBe(200);
  });

  it('403 insufficient_scope param model: uploading a document the project would embed with a model outside the list', { timeout: 120_000 }, async () => {
    const p = await setup();
    const refused = await p.chatOnly.post('/v1/rag/documents', { name: 'dogs', content: 'Dogs bark at the mail carrier.' });
    expectError(refused, 403, 'insufficient_scope', 'model');
    expect(refused.body.error.message).toContain('mock-embed-1');
    const accepted = await p.byProvider.post('/v1/rag/documents', { name: 'dogs', content: 'Dogs bark at the mail carrier.' });
    expect(accepted.status, accepted.raw).toBe(200);
    await indexNow(t);
    expect((await p.byProvider.get(`/v1/rag/documents/${accepted.body.id}`)).body.status).toBe('ready');
  });
});
