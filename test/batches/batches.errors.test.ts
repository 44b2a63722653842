import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchRunner } from '../../src/jobs/batch-runner/runner.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { expectGqlError, expectGqlHiddenFrom, gqlClient, type Gql } from '../graphql/gql.ts';
import { multipart } from '../rag/support.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  // The built-in mock provider (mock-1, price 0).
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
}, 240_000);
afterAll(async () => {
  await t?.close();
});

const SCOPES = ['inference:write', 'governance:manage'];
const line = (id: string, model = 'mock-1') => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { model, messages: [{ role: 'user', content: `hi ${id}` }] } });

async function upload(key: string, data: string | Buffer, fields: Record<string, string> = { purpose: 'batch' }, headers: Record<string, string> = {}) {
  const { payload, contentType } = multipart({ name: 'in.jsonl', type: 'application/jsonl', data }, fields);
  const res = await t.app.inject({ method: 'POST', url: '/v1/files', headers: { authorization: `Bearer ${key}`, 'content-type': contentType, ...headers }, payload });
  return { status: res.statusCode, headers: res.headers, body: JSON.parse(res.body), raw: res.body };
}

async function batchOf(key: string, lines: string[]) {
  const f = await upload(key, lines.join('\n'));
  expect(f.status, f.raw).toBe(200);
  const b = await client(t.app, key).post('/v1/batches', { input_file_id: f.body.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
  expect(b.status, b.raw).toBe(200);
  return { file: f.body, batch: b.body };
}

describe('files and batches: every error', () => {
  it('400 invalid_request naming the field: purpose, file, JSONL, endpoint, completion_window, metadata, a non-multipart body', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const api = client(t.app, s.secret);
    expectError(await upload(s.secret, line('a'), { purpose: 'fine-tune' }), 400, 'invalid_request', 'purpose');
    expectError(await upload(s.secret, '\n\n'), 400, 'invalid_request', 'file');
    const notJson = await upload(s.secret, `${line('a')}\n{oops`);
    expectError(notJson, 400, 'invalid_request', 'file');
    expect(notJson.body.error.message).toMatch(/Line 2/);
    expectError(await api.post('/v1/files', { purpose: 'batch' }), 400, 'invalid_request', 'file');
    const f = await upload(s.secret, line('a'));
    expect(f.status, f.raw).toBe(200);
    expectError(await api.post('/v1/batches', { input_file_id: f.body.id, endpoint: '/v1/completions', completion_window: '24h' }), 400, 'invalid_request', 'endpoint');
    expectError(await api.post('/v1/batches', { input_file_id: f.body.id, endpoint: '/v1/chat/completions', completion_window: '48h' }), 400, 'invalid_request', 'completion_window');
    expectError(await api.post('/v1/batches', { endpoint: '/v1/chat/completions', completion_window: '24h' }), 400, 'invalid_request', 'input_file_id');
    expectError(await api.get('/v1/batches', { query: { limit: 0 } }), 400, 'invalid_request', 'limit');
    expectError(await api.get('/v1/batches', { query: { after: 'batch_nope' } }), 400, 'invalid_request', 'starting_after');
    // The operator names the project (project_id or X-Svc-Project); without one: 400 missing_project_id.
    expectError(await operator.post('/v1/batches', { input_file_id: f.body.id, endpoint: '/v1/chat/completions', completion_window: '24h' }), 400, 'missing_project_id', 'project_id');
    const asOperator = await operator.post('/v1/batches', { project_id: s.projectId, input_file_id: f.body.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect(asOperator.status, asOperator.raw).toBe(200);
    expect(asOperator.body).toMatchObject({ project_id: s.projectId, key_id: 'key_master' });
  });

  it('400 on cancelling an ended batch and on deleting the input of a running one', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const api = client(t.app, s.secret);
    const { file, batch } = await batchOf(s.secret, [line('a')]);
    expectError(await api.delete(`/v1/files/${file.id}`), 400, 'invalid_request', 'file_id');
    await new BatchRunner(t.deps, { sleep: async (ms) => t.clock.advance(ms) }).runPending();
    expect((await api.get(`/v1/batches/${batch.id}`)).body.status).toBe('completed');
    expectError(await api.post(`/v1/batches/${batch.id}/cancel`, {}), 400, 'invalid_request', 'batch_id');
    const del = await api.delete(`/v1/files/${file.id}`);
    expect(del.body).toEqual({ id: file.id, object: 'file', deleted: true });
    expectError(await api.get(`/v1/files/${file.id}`), 404, 'not_found', 'file_id');
  });

  it('403 zero_retention: a zero-retention project keeps no files', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const api = client(t.app, s.secret);
    const f = await upload(s.secret, line('a'));
    expect((await api.put(`/v1/projects/${s.projectId}/retention`, { mode: 'zero' })).status).toBe(200);
    const refused = await upload(s.secret, line('a'));
    expectError(refused, 403, 'zero_retention');
    expect(refused.body.error.message).toMatch(/zero retention/);
    expectError(await api.post('/v1/batches', { input_file_id: f.body.id, endpoint: '/v1/chat/completions', completion_window: '24h' }), 403, 'zero_retention');
  });

  it("413 document_too_large over the plan's limit (starter 1 MB)", async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const big = Array.from({ length: 12_000 }, (_, i) => line(`l${i}`)).join('\n');
    expect(big.length).toBeGreaterThan(1024 * 1024);
    expectError(await upload(s.secret, big), 413, 'document_too_large', 'file');
  });

  it('404 record_not_retained once the content is past the project retention', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const api = client(t.app, s.secret);
    expect((await api.put(`/v1/projects/${s.projectId}/retention`, { mode: 'standard', days: 1 })).status).toBe(200);
    const f = await upload(s.secret, line('a'));
    expect((await api.get(`/v1/files/${f.body.id}/content`)).status).toBe(200);
    t.clock.advance(2 * 86_400_000);
    expectError(await api.get(`/v1/files/${f.body.id}/content`), 404, 'record_not_retained', 'file_id');
  });

  it('403 insufficient_scope without inference:write; another project\'s batch and file are 404, on REST and GraphQL', async () => {
    const a = await seedProject(operator, { scopes: SCOPES });
    const b = await seedProject(operator, { scopes: SCOPES });
    const { file, batch } = await batchOf(a.secret, [line('a')]);
    const none = await seedProject(operator, { scopes: ['usage:read'] });
    await expectScopeRequired(client(t.app, none.secret), [
      { method: 'get', url: '/v1/batches' },
      { method: 'get', url: `/v1/batches/${batch.id}` },
      { method: 'post', url: '/v1/batches', body: { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' } },
      { method: 'post', url: `/v1/batches/${batch.id}/cancel`, body: {} },
      { method: 'get', url: `/v1/files/${file.id}` },
      { method: 'get', url: `/v1/files/${file.id}/content` },
      { method: 'delete', url: `/v1/files/${file.id}` },
    ]);
    const other = client(t.app, b.secret);
    await expectHiddenFrom(other, [
      { method: 'get', url: `/v1/batches/${batch.id}` },
      { method: 'post', url: `/v1/batches/${batch.id}/cancel`, body: {} },
      { method: 'get', url: `/v1/files/${file.id}` },
      { method: 'get', url: `/v1/files/${file.id}/content` },
      { method: 'delete', url: `/v1/files/${file.id}` },
      { method: 'post', url: '/v1/batches', body: { input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' } },
    ]);
    expect((await other.get('/v1/batches')).body.data.map((x: any) => x.id)).not.toContain(batch.id);
    await expectGqlHiddenFrom(gql, b.secret, [
      { field: 'batch', query: 'query($id: ID!) { batch(id: $id) { id } }', variables: { id: batch.id } },
      { field: 'cancelBatch', query: 'mutation($id: ID!) { cancelBatch(id: $id) { id } }', variables: { id: batch.id } },
    ]);
  });

  it('GraphQL: createBatch, batch, batches and cancelBatch over the same service', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const f = await upload(s.secret, [line('a'), line('b')].join('\n'));
    const created = await gql(
      'mutation($f: String!) { createBatch(inputFileId: $f, endpoint: "/v1/chat/completions", completionWindow: "24h", metadata: {k: "v"}) { id status endpoint requestCounts { total completed failed } metadata } }',
      { f: f.body.id },
      { key: s.secret },
    );
    expect(created.body.errors).toBeUndefined();
    const b = created.body.data.createBatch;
    expect(b).toMatchObject({ status: 'validating', endpoint: '/v1/chat/completions', requestCounts: { total: 2, completed: 0, failed: 0 }, metadata: { k: 'v' } });
    const got = await gql('query($id: ID!) { batch(id: $id) { id status } batches(first: 5) { edges { node { id } } } }', { id: b.id }, { key: s.secret });
    expect(got.body.data.batch).toEqual({ id: b.id, status: 'validating' });
    expect(got.body.data.batches.edges.map((e: any) => e.node.id)).toContain(b.id);
    const cancelled = await gql('mutation($id: ID!) { cancelBatch(id: $id) { status cancellingAt } }', { id: b.id }, { key: s.secret });
    expect(cancelled.body.data.cancelBatch.status).toBe('cancelling');
    const bad = await gql('mutation($f: String!) { createBatch(inputFileId: $f, endpoint: "/v1/nope", completionWindow: "24h") { id } }', { f: f.body.id }, { key: s.secret });
    expectGqlError(bad, 'invalid_request', { param: 'endpoint', httpStatus: 400, path: ['createBatch'] });
  });

  it('expires a batch past its completion window: the lines not run are in the error file as batch_expired', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const api = client(t.app, s.secret);
    const { batch } = await batchOf(s.secret, [line('a'), line('b')]);
    t.clock.advance(25 * 3600 * 1000);
    await new BatchRunner(t.deps).runPending();
    const done = await api.get(`/v1/batches/${batch.id}`);
    expect(done.body).toMatchObject({ status: 'expired', request_counts: { total: 2, completed: 0, failed: 2 } });
    expect(done.body.expired_at).toBeGreaterThan(0);
    const errors = (await api.get(`/v1/files/${done.body.error_file_id}/content`)).raw.trim().split('\n').map((l: string) => JSON.parse(l));
    expect(errors.map((l: any) => l.error.code)).toEqual(['batch_expired', 'batch_expired']);
  });
});
