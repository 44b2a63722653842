import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { uniqueName } from '../helpers/services.ts';
import { verticalProject } from '../verticals/support.ts';
import { DEV, DIFF, FILES, readyRepository } from './support.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
});
afterAll(() => t.close());

const as = (secret: string) => client(t.app, secret);
const keyWith = async (projectId: string, scopes: string[]) =>
  (await operator.post('/v1/keys', { project_id: projectId, name: uniqueName('k'), scopes })).body.secret as string;

describe('Dev scopes (spec §5.6)', () => {
  it('a Dev key needs dev:write plus inference:write for model work; dev:write alone writes repositories only', async () => {
    const p = await verticalProject(operator, DEV);
    const repo = await readyRepository(t, as(p.secret));
    const writeOnly = as(await keyWith(p.projectId, ['dev:write']));
    // Repositories and their files are not model work (the files' embeddings are the poster's, as RAG uploads).
    expect((await writeOnly.post('/v1/dev/repositories', { name: 'x' })).status).toBe(200);
    expect((await writeOnly.post(`/v1/dev/repositories/${repo.id}/files`, { files: [FILES[2]] })).status).toBe(200);
    expect((await writeOnly.patch(`/v1/dev/repositories/${repo.id}`, { comments_allowed: false })).status).toBe(200);
    for (const [url, body] of [
      [`/v1/dev/repositories/${repo.id}/questions`, { question: 'What does refundAmount return?' }],
      ['/v1/dev/reviews', { repository_id: repo.id, diff: DIFF }],
      ['/v1/dev/pull-requests/summaries', { title: 't', diff: DIFF }],
      ['/v1/dev/tests', { repository_id: repo.id, path: FILES[0]!.path }],
    ] as const) {
      const res = await writeOnly.post(url, body);
      expectError(res, 403, 'insufficient_scope');
      expect(res.body.error.message).toContain('inference:write');
    }
    expect(await t.deps.db.devTask.count({ where: { projectId: p.projectId } })).toBe(0);
  });

  it('a key with legal:write (and inference:write) opens nothing of Dev: 403 insufficient_scope', async () => {
    const p = await verticalProject(operator, DEV);
    const repo = await readyRepository(t, as(p.secret));
    const review = (await as(p.secret).post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF })).body;
    for (const scopes of [['legal:write'], ['legal:write', 'inference:write']]) {
      await expectScopeRequired(as(await keyWith(p.projectId, scopes)), [
        { method: 'post', url: '/v1/dev/repositories', body: { name: 'x' } },
        { method: 'get', url: '/v1/dev/repositories' },
        { method: 'get', url: `/v1/dev/repositories/${repo.id}` },
        { method: 'post', url: `/v1/dev/repositories/${repo.id}/files`, body: { files: [FILES[0]] } },
        { method: 'get', url: `/v1/dev/repositories/${repo.id}/files` },
        { method: 'post', url: `/v1/dev/repositories/${repo.id}/questions`, body: { question: 'q' } },
        { method: 'post', url: '/v1/dev/reviews', body: { repository_id: repo.id, diff: DIFF } },
        { method: 'get', url: '/v1/dev/reviews' },
        { method: 'get', url: `/v1/dev/reviews/${review.id}` },
        { method: 'post', url: '/v1/dev/pull-requests/summaries', body: { title: 't', diff: DIFF } },
        { method: 'get', url: '/v1/dev/pull-requests/summaries' },
        { method: 'post', url: '/v1/dev/tests', body: { repository_id: repo.id, path: 'README.md' } },
        { method: 'get', url: '/v1/dev/tests' },
      ]);
    }
  });

  it('dev:read reads every Dev object and writes none', async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const repo = await readyRepository(t, api);
    const review = (await api.post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF })).body;
    const summary = (await api.post('/v1/dev/pull-requests/summaries', { title: 't', diff: DIFF })).body;
    const test = (await api.post('/v1/dev/tests', { repository_id: repo.id, path: FILES[0]!.path })).body;
    const reader = as(await keyWith(p.projectId, ['dev:read']));
    for (const url of [
      '/v1/dev/repositories',
      `/v1/dev/repositories/${repo.id}`,
      `/v1/dev/repositories/${repo.id}/files`,
      '/v1/dev/reviews',
      `/v1/dev/reviews/${review.id}`,
      '/v1/dev/pull-requests/summaries',
      `/v1/dev/pull-requests/summaries/${summary.id}`,
      '/v1/dev/tests',
      `/v1/dev/tests/${test.id}`,
    ]) {
      const res = await reader.get(url);
      expect({ url, status: res.status }).toEqual({ url, status: 200 });
    }
    await expectScopeRequired(reader, [
      { method: 'post', url: '/v1/dev/repositories', body: { name: 'x' } },
      { method: 'post', url: `/v1/dev/repositories/${repo.id}/files`, body: { files: [FILES[0]] } },
      { method: 'post', url: `/v1/dev/repositories/${repo.id}/questions`, body: { question: 'q' } },
      { method: 'post', url: '/v1/dev/reviews', body: { repository_id: repo.id, diff: DIFF } },
      { method: 'post', url: '/v1/dev/pull-requests/summaries', body: { title: 't', diff: DIFF } },
      { method: 'post', url: '/v1/dev/tests', body: { repository_id: repo.id, path: 'README.md' } },
    ]);
    expectError(await reader.patch(`/v1/dev/repositories/${repo.id}`, { comments_allowed: false }), 403, 'insufficient_scope');
  });
});

describe('tenant isolation', () => {
  it("another project's repositories, reviews, summaries and tests are 404 not_found, and absent from its lists", async () => {
    const a = await verticalProject(operator, DEV);
    const b = await verticalProject(operator, DEV);
    const api = as(a.secret);
    const repo = await readyRepository(t, api);
    const review = (await api.post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF })).body;
    const summary = (await api.post('/v1/dev/pull-requests/summaries', { repository_id: repo.id, title: 't', diff: DIFF })).body;
    const test = (await api.post('/v1/dev/tests', { repository_id: repo.id, path: FILES[0]!.path })).body;
    const other = as(b.secret);
    await expectHiddenFrom(other, [
      { method: 'get', url: `/v1/dev/repositories/${repo.id}` },
      { method: 'get', url: `/v1/dev/repositories/${repo.id}/files` },
      { method: 'post', url: `/v1/dev/repositories/${repo.id}/files`, body: { files: [FILES[0]] } },
      { method: 'post', url: `/v1/dev/repositories/${repo.id}/questions`, body: { question: 'q' } },
      { method: 'post', url: '/v1/dev/reviews', body: { repository_id: repo.id, diff: DIFF } },
      { method: 'post', url: '/v1/dev/pull-requests/summaries', body: { repository_id: repo.id, title: 't', diff: DIFF } },
      { method: 'post', url: '/v1/dev/tests', body: { repository_id: repo.id, path: FILES[0]!.path } },
      { method: 'get', url: `/v1/dev/reviews/${review.id}` },
      { method: 'get', url: `/v1/dev/pull-requests/summaries/${summary.id}` },
      { method: 'get', url: `/v1/dev/tests/${test.id}` },
      // Naming the other project is refused the same way.
      { method: 'post', url: '/v1/dev/repositories', body: { project_id: a.projectId, name: 'x' } },
      { method: 'post', url: '/v1/dev/pull-requests/summaries', body: { project_id: a.projectId, title: 't', diff: DIFF } },
    ]);
    expectError(await other.patch(`/v1/dev/repositories/${repo.id}`, { comments_allowed: false }), 404, 'not_found', 'repository_id');
    for (const url of ['/v1/dev/repositories', '/v1/dev/reviews', '/v1/dev/pull-requests/summaries', '/v1/dev/tests']) {
      expect((await other.get(url)).body.data).toEqual([]);
    }
    // A review by id of the other kind is not found either (a rev_ is not a summary).
    expectError(await api.get(`/v1/dev/pull-requests/summaries/${review.id}`), 404, 'not_found', 'summary_id');
    // The operator reads any project's and names the project of a write.
    expect((await operator.get(`/v1/dev/reviews/${review.id}`)).body.project_id).toBe(a.projectId);
    expect((await operator.post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF })).body.project_id).toBe(a.projectId);
  });
});
