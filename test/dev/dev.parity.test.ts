import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { gqlClient, type Gql } from '../graphql/gql.ts';
import { runVerticalWork, verticalProject } from '../verticals/support.ts';
import { DEV, DIFF } from './support.ts';

// The same action through REST and GraphQL: the same stored row, job, audit entry, event and answer (STYLE: a parity
// test per action).

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

async function trail(projectId: string, targetId: string) {
  const audit = await t.deps.db.auditEvent.findMany({ where: { projectId, targetId }, orderBy: { id: 'asc' } });
  const events = await t.deps.db.event.findMany({ where: { projectId }, orderBy: { id: 'asc' } });
  const jobs = await t.deps.db.verticalJob.findMany({ where: { projectId, subjectId: targetId } });
  const ids = (s: string) => s.replaceAll(targetId, 'ID').replace(/vjb_[0-9a-z]{26}/g, 'JOB');
  return JSON.parse(
    ids(
      JSON.stringify({
        audit: audit.map((a) => ({ action: a.action, actor: a.actorKeyId, data: a.data })),
        events: events.filter((e) => JSON.stringify(e.data).includes(targetId)).map((e) => ({ type: e.type, data: e.data })),
        jobs: jobs.map((j) => ({ kind: j.kind, keyId: j.keyId, status: j.status })),
      }),
    ),
  );
}

describe('REST and GraphQL parity', () => {
  it('create and get a review: the same row, job, audit entry, dev.review.completed and answer', async () => {
    const p = await verticalProject(operator, DEV);
    const api = client(t.app, p.secret);
    const repo = (await api.post('/v1/dev/repositories', { name: 'acme/shop', git_host: 'github' })).body;
    const input = { repository_id: repo.id, diff: DIFF, title: 'Parity', post_comments: true };
    const rest = (await api.post('/v1/dev/reviews', input)).body;
    const created = await gql(
      'mutation($i: CreateDevReviewInput!) { createDevReview(input: $i) { id repositoryId title status postComments diffBytes summary comments { path } } }',
      { i: { repositoryId: repo.id, diff: DIFF, title: 'Parity', postComments: true } },
      { key: p.secret },
    );
    const viaGql = created.body.data.createDevReview;
    expect(viaGql).toEqual({
      id: expect.stringMatching(/^rev_/),
      repositoryId: rest.repository_id,
      title: rest.title,
      status: rest.status,
      postComments: rest.post_comments,
      diffBytes: rest.diff_bytes,
      summary: rest.summary,
      comments: rest.comments,
    });
    expect(await runVerticalWork(t)).toEqual(['succeeded', 'succeeded']);

    const row = async (id: string) => {
      const { id: _id, jobId: _j, createdAt: _c, completedAt, ...rest } = await t.deps.db.devTask.findUniqueOrThrow({ where: { id } });
      return { ...rest, completed: completedAt !== null };
    };
    expect(await row(viaGql.id)).toEqual(await row(rest.id));
    const a = await trail(p.projectId, rest.id);
    expect(a.audit.map((x: { action: string }) => x.action)).toEqual(['dev_review.create']);
    expect(a.events.map((x: { type: string }) => x.type)).toEqual(['dev.review.completed']);
    expect(a.jobs).toEqual([{ kind: 'dev.review', keyId: p.keyId, status: 'succeeded' }]);
    expect(await trail(p.projectId, viaGql.id)).toEqual(a);

    const got = (await api.get(`/v1/dev/reviews/${viaGql.id}`)).body;
    const read = await gql('query($id: ID!) { devReview(id: $id) { id status summary comments { path line body severity } completedAt } }', { id: rest.id }, { key: p.secret });
    const restOfRest = (await api.get(`/v1/dev/reviews/${rest.id}`)).body;
    expect(read.body.data.devReview).toEqual({ id: rest.id, status: restOfRest.status, summary: restOfRest.summary, comments: restOfRest.comments, completedAt: restOfRest.completed_at });
    expect({ ...got, id: 'X', created_at: 0, completed_at: 0 }).toEqual({ ...restOfRest, id: 'X', created_at: 0, completed_at: 0 });
  });
});
