import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
});
afterAll(() => t.close());

describe('projects', () => {
  it('lets the operator create a project with plan starter by default', async () => {
    const res = await operator.post('/v1/projects', { name: 'Acme' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^prj_[0-9a-z]{26}$/),
      object: 'svc.project',
      name: 'Acme',
      plan: 'starter',
      region: null,
      status: 'active',
      created_at: Math.floor(t.clock.now() / 1000),
    });
    expect(res.headers['x-svc-project']).toBe(res.body.id);
    const audit = await t.deps.db.auditEvent.findMany({ where: { projectId: res.body.id, action: 'project.create' } });
    expect(audit).toHaveLength(1);
    // plan: null is the default plan too (as GraphQL's createProject reads it).
    expect((await operator.post('/v1/projects', { name: 'Acme null', plan: null })).body.plan).toBe('starter');
  });

  it('gets, lists and archives; archiving twice returns the same project', async () => {
    const created = await operator.post('/v1/projects', { name: 'Beta', plan: 'growth', region: 'eu-west-1' });
    const got = await operator.get(`/v1/projects/${created.body.id}`);
    expect(got.body).toEqual(created.body);
    const list = await operator.get('/v1/projects', { query: { limit: 100 } });
    expect(list.body.data.map((p: { id: string }) => p.id)).toContain(created.body.id);
    const archived = await operator.post(`/v1/projects/${created.body.id}/archive`);
    expect(archived.status).toBe(200);
    expect(archived.body.status).toBe('archived');
    const again = await operator.post(`/v1/projects/${created.body.id}/archive`);
    expect(again.body).toEqual(archived.body);
    expect(await t.deps.db.auditEvent.count({ where: { projectId: created.body.id, action: 'project.archive' } })).toBe(1);
  });

  it('lets a project key see its own project only', async () => {
    const mine = await seedProject(operator);
    const api = client(t.app, mine.secret);
    expect((await api.get(`/v1/projects/${mine.projectId}`)).body.id).toBe(mine.projectId);
    const theirs = await seedProject(operator);
    expectError(await api.get(`/v1/projects/${theirs.projectId}`), 404, 'not_found', 'id');
    // Its own project, with another one named in the header or the query: 404 as well.
    expectError(await api.get(`/v1/projects/${mine.projectId}`, { headers: { 'x-svc-project': theirs.projectId } }), 404, 'not_found', 'project_id');
    expectError(await api.get(`/v1/projects/${mine.projectId}?project_id=${theirs.projectId}`), 404, 'not_found', 'project_id');
    // The operator naming two projects: 400.
    expectError(await operator.get(`/v1/projects/${mine.projectId}`, { headers: { 'x-svc-project': theirs.projectId } }), 400, 'invalid_request', 'project_id');
  });

  it('validates the body', async () => {
    expectError(await operator.post('/v1/projects', {}), 400, 'invalid_request', 'name');
    expectError(await operator.post('/v1/projects', { name: '' }), 400, 'invalid_request', 'name');
    expectError(await operator.post('/v1/projects', { name: 'x', plan: 'platinum' }), 400, 'invalid_request', 'plan');
    expectError(await operator.post('/v1/projects', { name: 'x', region: 'Not A Region' }), 400, 'invalid_request', 'region');
    expectError(await operator.get('/v1/projects/prj_missing'), 404, 'not_found', 'id');
    expectError(await operator.post('/v1/projects/prj_missing/archive'), 404, 'not_found', 'id');
  });
});
