import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import type { Receiver } from '../helpers/https-receiver.ts';
import { uniqueName } from '../helpers/services.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';
import { deliver, receiverFor, runVerticalWork, verticalProject } from '../verticals/support.ts';
import { webhookEnv } from '../webhooks/support.ts';
import { DEV, DIFF, FILES, indexNow } from './support.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;
const receivers: Receiver[] = [];

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t.close();
});

const CREATE = 'mutation($i: CreateDevRepositoryInput!) { createDevRepository(input: $i) { id status gitHost commentsAllowed defaultBranch files } }';
const POST_FILES = 'mutation($id: ID!, $i: PostDevRepositoryFilesInput!) { postDevRepositoryFiles(repositoryId: $id, input: $i) { id status files fileCounts { indexing ready failed } } }';
const ASK = 'mutation($id: ID!, $q: String!) { askDevRepository(repositoryId: $id, question: $q, topK: 3) { id repositoryId answer citations { source path chunkId text } } }';
const REVIEW = 'mutation($i: CreateDevReviewInput!) { createDevReview(input: $i) { id status postComments diffBytes comments { path } } }';
const SUMMARIZE = 'mutation($i: SummarizePullRequestInput!) { summarizePullRequest(input: $i) { id status repositoryId } }';
const TEST = 'mutation($i: GenerateDevTestInput!) { generateDevTest(input: $i) { id status path framework } }';

async function repository(key: string, input: Record<string, unknown> = { name: 'acme/shop', gitHost: 'github' }) {
  const created = await gql(CREATE, { i: input }, { key });
  expect(created.body.errors, created.raw).toBeUndefined();
  return created.body.data.createDevRepository as { id: string; status: string; commentsAllowed: boolean };
}

describe('Dev on GraphQL', () => {
  it('repository_not_indexed, then an answer with file citations; the repository and its files as indexed', async () => {
    const p = await verticalProject(operator, DEV);
    const key = { key: p.secret };
    const repo = await repository(p.secret);
    expect(repo).toMatchObject({ status: 'indexing', commentsAllowed: true });
    const early = await gql(ASK, { id: repo.id, q: 'How are refunds computed?' }, key);
    expectGqlError(early, 'repository_not_indexed', { httpStatus: 409, param: 'repository_id', path: ['askDevRepository'] });

    const posted = await gql(POST_FILES, { id: repo.id, i: { files: FILES } }, key);
    expect(posted.body.data.postDevRepositoryFiles).toEqual({ id: repo.id, status: 'indexing', files: 3, fileCounts: { indexing: 3, ready: 0, failed: 0 } });
    const tooBig = await gql(POST_FILES, { id: repo.id, i: { files: [{ path: 'big.txt', content: 'x'.repeat(1024 * 1024 + 1) }] } }, key);
    // The GraphQL body is bounded by the server's body limit (1 MB by default): large files go through REST.
    expect(tooBig.status).toBe(413);
    const dup = await gql(POST_FILES, { id: repo.id, i: { files: [FILES[0], FILES[0]] } }, key);
    expectGqlError(dup, 'invalid_request', { httpStatus: 400, param: 'files[1].path' });
    await indexNow(t);

    const view = await gql('query($id: ID!) { devRepository(id: $id) { status files repositoryFiles { edges { node { path status chunks } } } } }', { id: repo.id }, key);
    expect(view.body.data.devRepository.status).toBe('ready');
    expect(view.body.data.devRepository.repositoryFiles.edges.map((e: any) => e.node.status)).toEqual(['ready', 'ready', 'ready']);

    const asked = await gql(ASK, { id: repo.id, q: 'How is the refund fee computed?' }, key);
    expect(asked.body.errors, asked.raw).toBeUndefined();
    const answer = asked.body.data.askDevRepository;
    expect(answer).toMatchObject({ repositoryId: repo.id, answer: 'How is the refund fee computed?' });
    expect(answer.id).toMatch(/^inf_/);
    expect(answer.citations[0]).toMatchObject({ source: 1, path: 'src/payments/refund.ts' });
    await t.deps.outcomes.flush();
    expect(await t.deps.db.usageRecord.count({ where: { projectId: p.projectId, keyId: p.keyId } })).toBe(1);
  });

  it('diff_too_large, git_host_forbidden, not_found path; dev.review.completed and dev.pull_request.summarized reach a receiver', async () => {
    await runVerticalWork(t);
    const p = await verticalProject(operator, DEV);
    const key = { key: p.secret };
    const r = await receiverFor(operator, p.projectId, ['dev.review.completed', 'dev.pull_request.summarized']);
    receivers.push(r);
    const open = await repository(p.secret);
    const closed = await repository(p.secret, { name: 'acme/private', gitHost: 'bitbucket', commentsAllowed: false });

    const big = await gql(REVIEW, { i: { repositoryId: open.id, diff: 'x'.repeat(200 * 1024 + 1) } }, key);
    expectGqlError(big, 'diff_too_large', { httpStatus: 409, param: 'diff', path: ['createDevReview'] });
    const forbidden = await gql(REVIEW, { i: { repositoryId: closed.id, diff: DIFF, postComments: true } }, key);
    expectGqlError(forbidden, 'git_host_forbidden', { httpStatus: 403, param: 'post_comments', path: ['createDevReview'] });
    const missing = await gql(TEST, { i: { repositoryId: open.id, path: 'src/nope.ts' } }, key);
    expectGqlError(missing, 'not_found', { httpStatus: 404, param: 'path', path: ['generateDevTest'] });
    const bigSummary = await gql(SUMMARIZE, { i: { title: 't', diff: 'x'.repeat(200 * 1024 + 1) } }, key);
    expectGqlError(bigSummary, 'diff_too_large', { httpStatus: 409, param: 'diff', path: ['summarizePullRequest'] });

    const review = await gql(REVIEW, { i: { repositoryId: open.id, diff: DIFF, title: 'Refund zero totals', postComments: true } }, key);
    expect(review.body.data.createDevReview).toMatchObject({ status: 'queued', postComments: true, diffBytes: Buffer.byteLength(DIFF), comments: [] });
    const reviewId = review.body.data.createDevReview.id;
    const summary = await gql(SUMMARIZE, { i: { repositoryId: open.id, title: 'Refund zero totals', diff: DIFF } }, key);
    const summaryId = summary.body.data.summarizePullRequest.id;
    expect(await runVerticalWork(t)).toEqual(['succeeded', 'succeeded']);

    const done = await gql('query($id: ID!) { devReview(id: $id) { status summary comments { path line body severity } } }', { id: reviewId }, key);
    expect(done.body.data.devReview.status).toBe('completed');
    expect(done.body.data.devReview.comments.length).toBeGreaterThan(0);
    const s = await gql('query($id: ID!) { devPullRequestSummary(id: $id) { status summary risk changes { path description } } }', { id: summaryId }, key);
    expect(s.body.data.devPullRequestSummary).toMatchObject({ status: 'completed', risk: expect.any(String) });
    const lists = await gql('{ devReviews { edges { node { id } } } devPullRequestSummaries { edges { node { id } } } }', {}, key);
    expect(lists.body.data.devReviews.edges.map((e: any) => e.node.id)).toEqual([reviewId]);
    expect(lists.body.data.devPullRequestSummaries.edges.map((e: any) => e.node.id)).toEqual([summaryId]);

    const events = await deliver(t, r, 2);
    const byType = Object.fromEntries(events.map((e) => [e.type, e.data]));
    expect(byType['dev.review.completed']).toMatchObject({ review_id: reviewId, repository_id: open.id, status: 'completed', post_comments: true, comments: done.body.data.devReview.comments });
    expect(byType['dev.pull_request.summarized']).toMatchObject({ summary_id: summaryId, repository_id: open.id, status: 'completed' });
  });

  it('generates a test file', async () => {
    const p = await verticalProject(operator, DEV);
    const key = { key: p.secret };
    const repo = await repository(p.secret);
    await gql(POST_FILES, { id: repo.id, i: { files: FILES } }, key);
    const asked = await gql(TEST, { i: { repositoryId: repo.id, path: FILES[0]!.path, framework: 'vitest' } }, key);
    expect(asked.body.data.generateDevTest).toMatchObject({ status: 'queued', path: FILES[0]!.path, framework: 'vitest' });
    await runVerticalWork(t);
    const done = await gql('query($id: ID!) { devTestGeneration(id: $id) { status testFile { path content } notes } }', { id: asked.body.data.generateDevTest.id }, key);
    expect(done.body.data.devTestGeneration).toMatchObject({ status: 'completed', testFile: { path: expect.any(String), content: expect.any(String) } });
  });
});

describe('Dev scopes and isolation on GraphQL', () => {
  it('legal:write opens nothing of Dev; dev:write alone runs no model work; dev:read reads; another project looks absent', async () => {
    const p = await verticalProject(operator, DEV);
    const repo = await repository(p.secret);
    const review = (await gql(REVIEW, { i: { repositoryId: repo.id, diff: DIFF } }, { key: p.secret })).body.data.createDevReview;
    const keyWith = async (scopes: string[]) => (await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('k'), scopes })).body.secret as string;
    await expectGqlScopeRequired(gql, await keyWith(['legal:write', 'inference:write']), [
      { field: 'devRepositories', query: '{ devRepositories { edges { node { id } } } }' },
      { field: 'devReview', query: 'query($id: ID!) { devReview(id: $id) { id } }', variables: { id: review.id } },
      { field: 'createDevRepository', query: 'mutation { createDevRepository(input: { name: "x" }) { id } }' },
      { field: 'createDevReview', query: REVIEW, variables: { i: { repositoryId: repo.id, diff: DIFF } } },
    ]);
    await expectGqlScopeRequired(gql, await keyWith(['dev:write']), [
      { field: 'createDevReview', query: REVIEW, variables: { i: { repositoryId: repo.id, diff: DIFF } } },
      { field: 'askDevRepository', query: ASK, variables: { id: repo.id, q: 'q' } },
      { field: 'summarizePullRequest', query: SUMMARIZE, variables: { i: { title: 't', diff: DIFF } } },
    ]);
    const reader = await keyWith(['dev:read']);
    const read = await gql('query($r: ID!, $v: ID!) { devRepository(id: $r) { id } devReview(id: $v) { id } devTestGenerations { edges { node { id } } } }', { r: repo.id, v: review.id }, { key: reader });
    expect(read.body.data).toEqual({ devRepository: { id: repo.id }, devReview: { id: review.id }, devTestGenerations: { edges: [] } });
    await expectGqlScopeRequired(gql, reader, [{ field: 'createDevRepository', query: 'mutation { createDevRepository(input: { name: "x" }) { id } }' }]);

    const other = await verticalProject(operator, DEV);
    await expectGqlHiddenFrom(gql, other.secret, [
      { field: 'devRepository', query: 'query($id: ID!) { devRepository(id: $id) { id } }', variables: { id: repo.id } },
      { field: 'devReview', query: 'query($id: ID!) { devReview(id: $id) { id } }', variables: { id: review.id } },
      { field: 'updateDevRepository', query: 'mutation($id: ID!) { updateDevRepository(id: $id, input: { commentsAllowed: false }) { id } }', variables: { id: repo.id } },
      { field: 'postDevRepositoryFiles', query: POST_FILES, variables: { id: repo.id, i: { files: [FILES[0]] } } },
      { field: 'askDevRepository', query: ASK, variables: { id: repo.id, q: 'q' } },
      { field: 'createDevReview', query: REVIEW, variables: { i: { repositoryId: repo.id, diff: DIFF } } },
      { field: 'generateDevTest', query: TEST, variables: { i: { repositoryId: repo.id, path: 'README.md' } } },
    ]);
    const lists = await gql('{ devRepositories { edges { node { id } } } devReviews { edges { node { id } } } }', {}, { key: other.secret });
    expect(lists.body.data).toEqual({ devRepositories: { edges: [] }, devReviews: { edges: [] } });
  });
});
