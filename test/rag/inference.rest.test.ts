import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';
import { indexNow, RAG_SCOPES } from './support.ts';

let t: TestApp;
let operator: Client;
let wire: MockOpenAI;

beforeAll(async () => {
  wire = await startMockOpenAI();
  const file = writeProvidersFile({
    providers: [
      { name: 'w', kind: 'openai', base_url: wire.url, region: 'local', models: [{ id: 'wire-chat', input_per_mtok: 1, output_per_mtok: 1 }] },
      { name: 'm', kind: 'mock', region: 'local', models: [{ id: 'mock-1', input_per_mtok: 0, output_per_mtok: 0 }, { id: 'mock-embed-1', type: 'embedding', input_per_mtok: 0, output_per_mtok: 0 }] },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  operator = client(t.app);
});
afterAll(async () => {
  await t.close();
  await wire.close();
});

const as = (secret: string) => client(t.app, secret);

async function project(model?: string) {
  const p = await seedProject(operator, { scopes: RAG_SCOPES });
  const api = as(p.secret);
  if (model) await api.put(`/v1/projects/${p.projectId}/rag`, { embedding_model: model });
  const policy = (await api.post('/v1/rag/documents', { name: 'Travel policy', content: 'Employees may fly business class on flights longer than six hours.' })).body.id;
  const menu = (await api.post('/v1/rag/documents', { name: 'Canteen', content: 'The canteen serves lasagna on Thursdays.' })).body.id;
  await indexNow(t);
  return { ...p, api, policy, menu };
}

const lastSent = () => wire.requests.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!.body;

describe('the rag inference option', () => {
  it('puts the chunks in a system message with numbered sources and answers with citations (/v1/inference)', async () => {
    const p = await project();
    const res = await p.api.post('/v1/inference', {
      model: 'wire-chat',
      project_id: p.projectId,
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Can I fly business class to Tokyo?' },
      ],
      rag: { top_k: 3 },
    });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.citations).toEqual([{ document_id: p.policy, chunk_id: expect.stringMatching(/^chk_/), score: expect.any(Number) }]);
    const sent = lastSent().messages;
    expect(sent.map((m: any) => m.role)).toEqual(['system', 'system', 'user']);
    expect(sent[0].content).toBe('You are terse.');
    expect(sent[1].content).toContain('[1] Travel policy');
    expect(sent[1].content).toContain('business class on flights longer than six hours');
    expect(sent[1].content).not.toContain('lasagna');
    expect(sent[2].content).toBe('Can I fly business class to Tokyo?');
  });

  it('uses rag.query and document_ids when given, and answers on /v1/chat/completions too', async () => {
    const p = await project();
    const res = await p.api.post('/v1/chat/completions', {
      model: 'wire-chat',
      messages: [{ role: 'user', content: 'What is for lunch?' }],
      rag: { query: 'lasagna OR business', document_ids: [p.menu] },
    });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.object).toBe('chat.completion');
    expect(res.body.citations).toEqual([{ document_id: p.menu, chunk_id: expect.any(String), score: expect.any(Number) }]);
    expect(lastSent().messages[0].content).toContain('[1] Canteen');
  });

  it('cites by hybrid search with mock-embed-1 when the project has an embedding model', async () => {
    const p = await project('mock-embed-1');
    const res = await p.api.post('/v1/inference', {
      model: 'mock-1',
      project_id: p.projectId,
      messages: [{ role: 'user', content: 'The canteen serves lasagna on Thursdays.' }],
      rag: { top_k: 2 },
    });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.citations.map((c: any) => c.document_id)).toEqual([p.menu, p.policy]);
    // First in both lists: the reciprocal rank fusion score of rank 1 twice.
    expect(res.body.citations[0].score).toBeCloseTo(2 / 61, 10);
  });

  it('answers with no citations ([]) and the messages unchanged when nothing matches', async () => {
    const p = await project();
    const res = await p.api.post('/v1/inference', { model: 'wire-chat', project_id: p.projectId, messages: [{ role: 'user', content: 'zebras' }], rag: {} });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.citations).toEqual([]);
    expect(lastSent().messages).toEqual([{ role: 'user', content: 'zebras' }]);
    const plain = await p.api.post('/v1/inference', { model: 'wire-chat', project_id: p.projectId, messages: [{ role: 'user', content: 'zebras' }] });
    expect(plain.body).not.toHaveProperty('citations');
  });

  it("carries the citations in the svc stream's done event", async () => {
    const p = await project();
    const res = await p.api.post('/v1/inference', {
      model: 'mock-1',
      project_id: p.projectId,
      stream: true,
      messages: [{ role: 'user', content: 'lasagna' }],
      rag: {},
    });
    expect(res.status, res.raw).toBe(200);
    const done = res.raw.split('\n\n').find((e) => e.startsWith('event: done'))!;
    const body = JSON.parse(done.split('\n').find((l) => l.startsWith('data: '))!.slice(6));
    expect(body.citations).toEqual([{ document_id: p.menu, chunk_id: expect.any(String), score: expect.any(Number) }]);
  });

  it('refuses a bad rag option with the param named', async () => {
    const p = await project();
    const call = (rag: unknown, messages: unknown = [{ role: 'user', content: 'hi' }]) =>
      p.api.post('/v1/inference', { model: 'wire-chat', project_id: p.projectId, messages, rag });
    expectError(await call({ top_k: 99 }), 400, 'invalid_request', 'rag.top_k');
    expectError(await call({ nope: 1 }), 400, 'invalid_request', 'rag.nope');
    expectError(await call({ document_ids: ['doc_unknown'] }), 404, 'not_found', 'rag.document_ids');
    expectError(await call({}, [{ role: 'system', content: 'only a system message' }]), 400, 'invalid_request', 'rag.query');
  });
});
