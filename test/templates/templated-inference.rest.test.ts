import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { uniqueName } from '../helpers/services.ts';
import { user, writeProvidersFile } from '../inference/fixtures.ts';

let t: TestApp;
let operator: Client;
let api: Client;
let projectId: string;

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [
      {
        name: 'priced',
        kind: 'mock',
        region: 'eu-west-1',
        models: [
          { id: 'mock-priced', input_per_mtok: 1, output_per_mtok: 2 },
          { id: 'mock-other', input_per_mtok: 1, output_per_mtok: 2 },
        ],
      },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  operator = client(t.app);
  const seeded = await seedProject(operator, { plan: 'growth', scopes: ['templates:manage', 'inference:write', 'usage:read'] });
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
});
afterAll(async () => {
  await t?.close();
});

async function template(overrides: Record<string, unknown> = {}) {
  const res = await api.post('/v1/templates', {
    name: uniqueName('tpl'),
    messages: [
      { role: 'system', content: 'Be {{tone}}.' },
      { role: 'user', content: 'Hello {{person}} & co' },
    ],
    variables: [{ name: 'tone', default: 'brief' }, { name: 'person' }],
    model: 'mock-priced',
    ...overrides,
  });
  expect(res.status, res.raw).toBe(200);
  return res.body as { id: string };
}

async function eventOf(requestId: string) {
  await t.deps.outcomes.flush();
  const events = await t.deps.db.event.findMany({ where: { type: 'inference.completed', data: { path: ['request_id'], equals: requestId } } });
  expect(events).toHaveLength(1);
  return events[0]!.data as Record<string, unknown>;
}

describe('inference with a template', () => {
  it('renders the template, uses its model, and carries template_id and template_version everywhere', async () => {
    const tpl = await template();
    const res = await api.post('/v1/inference', { project_id: projectId, template: { id: tpl.id, variables: { person: 'Ana <a@b.c>' } } });
    expect(res.status, res.raw).toBe(200);
    // The mock echoes the last user message: the rendered one, unescaped.
    expect(res.body.message.content).toBe('Hello Ana <a@b.c> & co');
    expect(res.body).toMatchObject({ model: 'mock-priced', template_id: tpl.id, template_version: 1 });

    const usage = await api.get('/v1/usage');
    const record = usage.body.data.find((r: any) => r.request_id === res.body.request_id);
    expect(record).toMatchObject({ template_id: tpl.id, template_version: 1, status: 'succeeded' });
    expect(await eventOf(res.body.request_id)).toMatchObject({ template_id: tpl.id, template_version: 1 });
  });

  it("appends the request's messages after the template's, and the request's model and params win", async () => {
    const tpl = await template({ params: { max_tokens: 1 } });
    const templated = await api.post('/v1/inference', { project_id: projectId, template: { id: tpl.id, variables: { person: 'Bo' } } });
    // The template's max_tokens (1): the echo is cut to 4 characters.
    expect(templated.body).toMatchObject({ finish_reason: 'length', message: { content: 'Hell' } });

    const res = await api.post('/v1/inference', { project_id: projectId,
      model: 'mock-other',
      max_tokens: 100,
      template: { id: tpl.id, variables: { person: 'Bo' } },
      messages: user('and then this'),
    });
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toMatchObject({ model: 'mock-other', finish_reason: 'stop', message: { content: 'and then this' } });
    // The mock's count, 1 + ⌈chars/4⌉ a message: "Be brief." 4, "Hello Bo & co" 5, then the request's "and then this" 5.
    expect(res.body.usage.prompt_tokens).toBe(14);
  });

  it('uses the latest version unless one is named, and sees a new version at once', async () => {
    const tpl = await template();
    const v1 = await api.post('/v1/inference', { project_id: projectId, template: { id: tpl.id, variables: { person: 'Cy' } } });
    expect(v1.body).toMatchObject({ template_version: 1, message: { content: 'Hello Cy & co' } });
    const published = await api.post(`/v1/templates/${tpl.id}/versions`, {
      messages: [{ role: 'user', content: 'Version two for {{person}}' }],
      variables: [{ name: 'person' }],
    });
    expect(published.status, published.raw).toBe(200);
    const latest = await api.post('/v1/inference', { project_id: projectId, model: 'mock-priced', template: { id: tpl.id, variables: { person: 'Cy' } } });
    expect(latest.body).toMatchObject({ template_version: 2, message: { content: 'Version two for Cy' } });
    const pinned = await api.post('/v1/inference', { project_id: projectId, template: { id: tpl.id, version: 1, variables: { person: 'Cy' } } });
    expect(pinned.body).toMatchObject({ template_version: 1, message: { content: 'Hello Cy & co' } });
    // Version 2 sets no model and the request names none.
    expectError(await api.post('/v1/inference', { project_id: projectId, template: { id: tpl.id, variables: { person: 'Cy' } } }), 400, 'invalid_request', 'model');
  });

  it('answers 400 template_variable_missing naming template.variables.<name>, on both inference routes', async () => {
    const tpl = await template();
    const inference = await api.post('/v1/inference', { project_id: projectId, template: { id: tpl.id, variables: { tone: 'x' } } });
    expectError(inference, 400, 'template_variable_missing', 'template.variables.person');
    const chat = await api.post('/v1/chat/completions', { template: { id: tpl.id } });
    expectError(chat, 400, 'template_variable_missing', 'template.variables.person');
  });

  it('works on /v1/chat/completions, the svc object carrying the template', async () => {
    const tpl = await template();
    const res = await api.post('/v1/chat/completions', { template: { id: tpl.id, variables: { person: 'Di' } } });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.choices[0].message.content).toBe('Hello Di & co');
    expect(res.body.svc).toMatchObject({ template_id: tpl.id, template_version: 1 });
  });

  it('works on /v1/responses, input appended after the template and the svc object carrying it', async () => {
    const tpl = await template();
    const res = await api.post('/v1/responses', { template: { id: tpl.id, variables: { person: 'Flo' } } });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.output[0].content[0].text).toBe('Hello Flo & co');
    expect(res.body.svc).toMatchObject({ template_id: tpl.id, template_version: 1 });
    const more = await api.post('/v1/responses', { model: 'mock-other', input: 'and more', template: { id: tpl.id, variables: { person: 'Flo' } } });
    expect(more.body).toMatchObject({ model: 'mock-other', output: [{ content: [{ text: 'and more' }] }] });
    expectError(await api.post('/v1/responses', { template: { id: tpl.id } }), 400, 'template_variable_missing', 'template.variables.person');
    expectError(await api.post('/v1/responses', { model: 'mock-priced' }), 400, 'invalid_request', 'input');
  });

  it("refuses another project's template and unknown versions with 404, and a request with neither messages nor template", async () => {
    const tpl = await template();
    const other = await seedProject(operator, { scopes: ['inference:write'] });
    const stranger = client(t.app, other.secret);
    expectError(await stranger.post('/v1/chat/completions', { template: { id: tpl.id, variables: { person: 'x' } } }), 404, 'not_found', 'template.id');
    expectError(await api.post('/v1/inference', { project_id: projectId, template: { id: 'tpl_nope', variables: { person: 'x' } } }), 404, 'not_found', 'template.id');
    expectError(await api.post('/v1/inference', { project_id: projectId, template: { id: tpl.id, version: 7, variables: { person: 'x' } } }), 404, 'not_found', 'template.version');
    expectError(await api.post('/v1/inference', { project_id: projectId, model: 'mock-priced' }), 400, 'invalid_request', 'messages');
    expectError(await api.post('/v1/inference', { project_id: projectId, template: { variables: {} } }), 400, 'invalid_request', 'template.id');
  });
});
