import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';
import { indexNow, RAG_SCOPES } from './support.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;
const MB = 1024 * 1024;

beforeAll(async () => {
  // GraphQL bodies obey the gateway's body limit (REST's upload route has its own): raised here to reach the plan's.
  t = await buildTestApp({ env: { SVC_BODY_LIMIT_BYTES: String(3 * MB) } });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(async () => {
  await t.close();
});

const DOC_FIELDS = 'id projectId name bytes contentType chunks status error metadata createdAt';
const UPLOAD = `mutation($name: String!, $content: String!, $metadata: JSON, $contentType: String) {
  uploadDocument(name: $name, content: $content, metadata: $metadata, contentType: $contentType) { ${DOC_FIELDS} } }`;
const QUERY = `query($query: String!, $mode: String, $topK: Int, $documentIds: [ID!]) {
  ragQuery(query: $query, mode: $mode, topK: $topK, documentIds: $documentIds) { documentId chunkId text score metadata } }`;

describe('GraphQL twins', () => {
  it('uploads, lists, reads, queries and deletes like REST', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const up = await gql(UPLOAD, { name: 'faq', content: 'Refunds are processed within five business days.', metadata: { lang: 'en' } }, { key: p.secret });
    expect(up.body.errors, up.raw).toBeUndefined();
    const doc = up.body.data.uploadDocument;
    expect(doc).toMatchObject({ projectId: p.projectId, name: 'faq', bytes: 48, contentType: 'text/plain', chunks: 0, status: 'processing', error: null, metadata: { lang: 'en' } });
    await indexNow(t);

    const rest = await client(t.app, p.secret).get(`/v1/rag/documents/${doc.id}`);
    const one = await gql(`query($id: ID!) { ragDocument(id: $id) { ${DOC_FIELDS} } }`, { id: doc.id }, { key: p.secret });
    expect(one.body.data.ragDocument).toEqual({
      id: rest.body.id,
      projectId: rest.body.project_id,
      name: rest.body.name,
      bytes: rest.body.bytes,
      contentType: rest.body.content_type,
      chunks: 1,
      status: 'ready',
      error: null,
      metadata: rest.body.metadata,
      createdAt: rest.body.created_at,
    });
    const list = await gql('{ ragDocuments(first: 10) { edges { node { id status } } } }', {}, { key: p.secret });
    expect(list.body.data.ragDocuments.edges.map((e: any) => e.node)).toEqual([{ id: doc.id, status: 'ready' }]);

    const q = await gql(QUERY, { query: 'refunds', mode: 'keyword' }, { key: p.secret });
    const restQ = await client(t.app, p.secret).post('/v1/rag/query', { query: 'refunds', mode: 'keyword' });
    expect(q.body.data.ragQuery).toEqual(restQ.body.data.map((c: any) => ({ documentId: c.document_id, chunkId: c.chunk_id, text: c.text, score: c.score, metadata: c.metadata })));

    const del = await gql(`mutation($id: ID!) { deleteDocument(id: $id) { id } }`, { id: doc.id }, { key: p.secret });
    expect(del.body.data.deleteDocument).toEqual({ id: doc.id });
    expect(await t.deps.db.ragChunk.count({ where: { documentId: doc.id } })).toBe(0);
    expectGqlError(await gql(`query($id: ID!) { ragDocument(id: $id) { id } }`, { id: doc.id }, { key: p.secret }), 'not_found', { httpStatus: 404 });
  });

  it('answers document_too_large (param content) over the plan, and vector without a model (param mode)', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES, plan: 'starter' });
    const big = 'x'.repeat(2 * MB);
    expectGqlError(await gql(UPLOAD, { name: 'big', content: big }, { key: p.secret }), 'document_too_large', { param: 'content', httpStatus: 413 });
    expectGqlError(await gql(QUERY, { query: 'x', mode: 'vector' }, { key: p.secret }), 'invalid_request', { param: 'mode', httpStatus: 400 });
  });

  it('sets the embedding model and queries by vector', async () => {
    const p = await seedProject(operator, { scopes: RAG_SCOPES });
    const set = await gql(
      'mutation($p: ID!, $m: String) { setRagSettings(projectId: $p, embeddingModel: $m) { projectId embeddingModel } }',
      { p: p.projectId, m: 'mock-embed-1' },
      { key: p.secret },
    );
    expect(set.body.data.setRagSettings).toEqual({ projectId: p.projectId, embeddingModel: 'mock-embed-1' });
    expectGqlError(
      await gql('mutation($p: ID!, $m: String) { setRagSettings(projectId: $p, embeddingModel: $m) { projectId } }', { p: p.projectId, m: 'mock-1' }, { key: p.secret }),
      'invalid_request',
      { param: 'embedding_model' },
    );
    const doc = (await gql(UPLOAD, { name: 'a', content: 'Owls hunt at night.' }, { key: p.secret })).body.data.uploadDocument;
    await indexNow(t);
    const q = await gql(QUERY, { query: 'Owls hunt at night.', mode: 'vector', topK: 1 }, { key: p.secret });
    expect(q.body.data.ragQuery).toHaveLength(1);
    expect(q.body.data.ragQuery[0].documentId).toBe(doc.id);
    expect(q.body.data.ragQuery[0].score).toBeCloseTo(1, 5);
  });

  it("hides another project's documents, and needs rag:write", async () => {
    const a = await seedProject(operator, { scopes: RAG_SCOPES });
    const b = await seedProject(operator, { scopes: RAG_SCOPES });
    const doc = (await gql(UPLOAD, { name: 'a', content: 'secret plans' }, { key: a.secret })).body.data.uploadDocument;
    await expectGqlHiddenFrom(gql, b.secret, [
      { field: 'ragDocument', query: 'query($id: ID!) { ragDocument(id: $id) { id } }', variables: { id: doc.id } },
      { field: 'deleteDocument', query: 'mutation($id: ID!) { deleteDocument(id: $id) { id } }', variables: { id: doc.id } },
      { field: 'ragQuery', query: 'query($p: ID) { ragQuery(projectId: $p, query: "secret") { chunkId } }', variables: { p: a.projectId } },
      { field: 'uploadDocument', query: 'mutation($p: ID) { uploadDocument(projectId: $p, name: "x", content: "y") { id } }', variables: { p: a.projectId } },
    ]);
    const none = await seedProject(operator, { scopes: ['usage:read'] });
    await expectGqlScopeRequired(gql, none.secret, [
      { field: 'ragDocuments', query: '{ ragDocuments { edges { node { id } } } }' },
      { field: 'uploadDocument', query: 'mutation { uploadDocument(name: "x", content: "y") { id } }' },
      { field: 'ragQuery', query: '{ ragQuery(query: "x") { chunkId } }' },
      { field: 'setRagSettings', query: `mutation { setRagSettings(projectId: "${none.projectId}", embeddingModel: null) { projectId } }` },
    ]);
  });
});
