import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { uniqueName } from '../helpers/services.ts';

const SCOPES = ['templates:manage', 'inference:write', 'usage:read', 'audit:read'];

let t: TestApp;
let operator: Client;
let api: Client;
let projectId: string;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  const seeded = await seedProject(operator, { scopes: SCOPES });
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
});
afterAll(async () => {
  await t?.close();
});

const greeting = (name = uniqueName('greet')) => ({
  name,
  description: 'Greets someone',
  messages: [
    { role: 'system', content: 'You are {{tone}}. <b>No escaping</b>' },
    { role: 'user', content: 'Say hello to {{person}} & {{friend}}.' },
  ],
  variables: [{ name: 'tone' , default: 'kind' }, { name: 'person' }, { name: 'friend', required: false }],
  model: 'mock-1',
  params: { temperature: 0.5 },
});

async function created(body: Record<string, unknown> = greeting()) {
  const res = await api.post('/v1/templates', body);
  expect(res.status, res.raw).toBe(200);
  return res.body;
}

describe('templates over REST', () => {
  it('creates a template with version 1 and reads it back', async () => {
    const body = greeting();
    const tpl = await created(body);
    expect(tpl).toEqual({
      id: expect.stringMatching(/^tpl_/),
      object: 'svc.template',
      project_id: projectId,
      name: body.name,
      description: 'Greets someone',
      latest_version: 1,
      created_at: Math.floor(t.clock.now() / 1000),
      updated_at: Math.floor(t.clock.now() / 1000),
    });
    expect((await api.get(`/v1/templates/${tpl.id}`)).body).toEqual(tpl);
    const v1 = await api.get(`/v1/templates/${tpl.id}/versions/1`);
    expect(v1.body).toEqual({
      object: 'svc.template_version',
      template_id: tpl.id,
      version: 1,
      messages: body.messages,
      variables: [
        { name: 'tone', required: true, default: 'kind' },
        { name: 'person', required: true },
        { name: 'friend', required: false },
      ],
      model: 'mock-1',
      params: { temperature: 0.5 },
      created_at: Math.floor(t.clock.now() / 1000),
    });
    const audit = await api.get('/v1/audit/events', { query: { action: 'template.create' } });
    expect(audit.body.data.map((a: any) => a.target_id)).toContain(tpl.id);
  });

  it('publishes versions (default latest + 1, or a given number) and lists them newest first by version', async () => {
    const tpl = await created();
    const v2 = await api.post(`/v1/templates/${tpl.id}/versions`, { messages: [{ role: 'user', content: 'v2 {{x}}' }], variables: [{ name: 'x' }] });
    expect(v2.status, v2.raw).toBe(200);
    expect(v2.body).toMatchObject({ object: 'svc.template_version', version: 2, model: null, params: null });
    const v5 = await api.post(`/v1/templates/${tpl.id}/versions`, { version: 5, messages: [{ role: 'user', content: 'v5' }] });
    expect(v5.body.version).toBe(5);
    expect((await api.get(`/v1/templates/${tpl.id}`)).body.latest_version).toBe(5);
    const v3 = await api.post(`/v1/templates/${tpl.id}/versions`, { version: 3, messages: [{ role: 'user', content: 'v3' }] });
    expect(v3.body.version).toBe(3);
    // Filling a gap leaves the latest where it was.
    expect((await api.get(`/v1/templates/${tpl.id}`)).body.latest_version).toBe(5);

    const page1 = await api.get(`/v1/templates/${tpl.id}/versions`, { query: { limit: 2 } });
    expect(page1.body.data.map((v: any) => v.version)).toEqual([5, 3]);
    expect(page1.body.has_more).toBe(true);
    expect(page1.headers['x-svc-has-more']).toBe('true');
    const page2 = await api.get(`/v1/templates/${tpl.id}/versions`, { query: { limit: 2, starting_after: 3 } });
    expect(page2.body.data.map((v: any) => v.version)).toEqual([2, 1]);
    expect(page2.body.has_more).toBe(false);
    const back = await api.get(`/v1/templates/${tpl.id}/versions`, { query: { limit: 1, ending_before: 2 } });
    expect(back.body.data.map((v: any) => v.version)).toEqual([3]);
    expectError(await api.get(`/v1/templates/${tpl.id}/versions`, { query: { starting_after: 4 } }), 400, 'invalid_request', 'starting_after');
    const audit = await api.get('/v1/audit/events', { query: { action: 'template.publish' } });
    expect(audit.body.data.filter((a: any) => a.target_id === tpl.id).map((a: any) => a.data.version)).toEqual([3, 5, 2]);
  });

  it('answers 409 template_version_conflict for a version already published', async () => {
    const tpl = await created();
    const res = await api.post(`/v1/templates/${tpl.id}/versions`, { version: 1, messages: [{ role: 'user', content: 'again' }] });
    expectError(res, 409, 'template_version_conflict', 'version');
    expect((await api.get(`/v1/templates/${tpl.id}/versions/1`)).body.messages).toEqual(greeting().messages);
  });

  it('lists templates newest first with id cursors', async () => {
    const own = await seedProject(operator, { scopes: SCOPES });
    const a = client(t.app, own.secret);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await a.post('/v1/templates', greeting());
      ids.push(res.body.id);
    }
    const page = await a.get('/v1/templates', { query: { limit: 2 } });
    expect(page.body).toMatchObject({ object: 'list', url: '/v1/templates', has_more: true });
    expect(page.body.data.map((x: any) => x.id)).toEqual([ids[2], ids[1]]);
    const next = await a.get('/v1/templates', { query: { limit: 2, starting_after: ids[1]! } });
    expect(next.body.data.map((x: any) => x.id)).toEqual([ids[0]]);
    expectError(await a.get('/v1/templates', { query: { limit: 0 } }), 400, 'invalid_request', 'limit');
  });

  it('renders with values and defaults, without HTML escaping', async () => {
    const tpl = await created();
    const res = await api.post(`/v1/templates/${tpl.id}/render`, { variables: { person: 'Ana <ana@x.org>' } });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.messages).toEqual([
      { role: 'system', content: 'You are kind. <b>No escaping</b>' },
      { role: 'user', content: 'Say hello to Ana <ana@x.org> & .' },
    ]);
    expect(res.body.version).toBe(1);
  });

  it('answers 400 template_variable_missing on render without a required variable', async () => {
    const tpl = await created();
    expectError(await api.post(`/v1/templates/${tpl.id}/render`, { variables: {} }), 400, 'template_variable_missing', 'variables.person');
    expectError(await api.post(`/v1/templates/${tpl.id}/render`, { variables: { person: 'x', nope: 1 } }), 400, 'invalid_request', 'variables.nope');
    expectError(await api.post(`/v1/templates/${tpl.id}/render`, { version: 9, variables: { person: 'x' } }), 404, 'not_found', 'version');
  });

  it('refuses bad fields with 400 naming them', async () => {
    const undeclared = await api.post('/v1/templates', { ...greeting(), messages: [{ role: 'user', content: 'Hi {{who}}' }] });
    expectError(undeclared, 400, 'invalid_request', 'messages');
    expect(undeclared.body.error.message).toContain('{{who}}');
    const taken = await created();
    expectError(await api.post('/v1/templates', { ...greeting(), name: taken.name }), 400, 'invalid_request', 'name');
    expectError(await api.post('/v1/templates', { ...greeting(), name: '' }), 400, 'invalid_request', 'name');
    expectError(await api.post('/v1/templates', { ...greeting(), messages: [] }), 400, 'invalid_request', 'messages');
    expectError(await api.post('/v1/templates', { ...greeting(), messages: [{ role: 'robot', content: 'x' }] }), 400, 'invalid_request', 'messages[0].role');
    expectError(await api.post('/v1/templates', { ...greeting(), model: 'no-such-model' }), 400, 'invalid_request', 'model');
    expectError(await api.post('/v1/templates', { ...greeting(), params: { temperature: 5 } }), 400, 'invalid_request', 'params.temperature');
    expectError(
      await api.post('/v1/templates', { ...greeting(), variables: [{ name: 'tone' }, { name: 'tone' }, { name: 'person' }] }),
      400,
      'invalid_request',
      'variables[1].name',
    );
    expectError(await api.post('/v1/templates', { ...greeting(), variables: [{ name: '1x' }] }), 400, 'invalid_request', 'variables[0].name');
    expectError(await api.post(`/v1/templates/${taken.id}/versions`, { version: 0, messages: [{ role: 'user', content: 'x' }] }), 400, 'invalid_request', 'version');
    expectError(await api.post('/v1/templates', { ...greeting(), messages: [{ role: 'user', content: '{{> partial}}' }] }), 400, 'invalid_request', 'messages');
  });

  it("hides another project's templates (404) and needs templates:manage", async () => {
    const tpl = await created();
    const other = await seedProject(operator, { scopes: SCOPES });
    const stranger = client(t.app, other.secret);
    await expectHiddenFrom(stranger, [
      { method: 'get', url: `/v1/templates/${tpl.id}` },
      { method: 'get', url: `/v1/templates/${tpl.id}/versions` },
      { method: 'get', url: `/v1/templates/${tpl.id}/versions/1` },
      { method: 'post', url: `/v1/templates/${tpl.id}/versions`, body: { messages: [{ role: 'user', content: 'x' }] } },
      { method: 'post', url: `/v1/templates/${tpl.id}/render`, body: { variables: { person: 'x' } } },
    ]);
    expect((await stranger.get('/v1/templates')).body.data.map((x: any) => x.id)).not.toContain(tpl.id);

    const inferenceOnly = await operator.post('/v1/keys', { project_id: projectId, name: uniqueName('inf'), scopes: ['inference:write'] });
    const weak = client(t.app, inferenceOnly.body.secret);
    await expectScopeRequired(weak, [
      { method: 'post', url: '/v1/templates', body: greeting() },
      { method: 'get', url: '/v1/templates' },
      { method: 'get', url: `/v1/templates/${tpl.id}` },
      { method: 'post', url: `/v1/templates/${tpl.id}/versions`, body: { messages: [{ role: 'user', content: 'x' }] } },
    ]);
    // Rendering is what inference does: inference:write is enough.
    expect((await weak.post(`/v1/templates/${tpl.id}/render`, { variables: { person: 'x' } })).status).toBe(200);
    const usageOnly = await operator.post('/v1/keys', { project_id: projectId, name: uniqueName('usage'), scopes: ['usage:read'] });
    await expectScopeRequired(client(t.app, usageOnly.body.secret), [
      { method: 'post', url: `/v1/templates/${tpl.id}/render`, body: { variables: { person: 'x' } } },
    ]);
  });

  it('replays a create with the same Idempotency-Key instead of creating twice', async () => {
    const body = greeting();
    const headers = { 'idempotency-key': uniqueName('idem') };
    const first = await api.post('/v1/templates', body, { headers });
    const again = await api.post('/v1/templates', body, { headers });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await t.deps.db.template.count({ where: { projectId, name: body.name } })).toBe(1);
  });

  it('lets the operator address the project by project_id', async () => {
    const res = await operator.post('/v1/templates', { ...greeting(), project_id: projectId });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.project_id).toBe(projectId);
    expectError(await operator.post('/v1/templates', greeting()), 400, 'missing_project_id', 'project_id');
  });
});
