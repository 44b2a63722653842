import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { uniqueName } from '../helpers/services.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;
let rest: Client;
let secret: string;
let projectId: string;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  const seeded = await seedProject(operator, { scopes: ['templates:manage', 'inference:write', 'audit:read'] });
  projectId = seeded.projectId;
  secret = seeded.secret;
  gql = gqlClient(t.app, secret);
  rest = client(t.app, secret);
});
afterAll(async () => {
  await t?.close();
});

const CREATE = `mutation($input: CreateTemplateInput!) {
  createTemplate(input: $input) { id projectId name description latestVersion createdAt updatedAt }
}`;
const PUBLISH = `mutation($id: ID!, $input: PublishTemplateVersionInput!) {
  publishTemplateVersion(templateId: $id, input: $input) {
    templateId version model params createdAt messages { role content } variables { name required default }
  }
}`;
const RENDER = `mutation($id: ID!, $version: Int, $variables: JSON) {
  renderTemplate(templateId: $id, version: $version, variables: $variables) { templateId version messages { role content } }
}`;

const input = (overrides: Record<string, unknown> = {}) => ({
  name: uniqueName('gql'),
  messages: [{ role: 'user', content: 'Hi {{who}}, {{greeting}}' }],
  variables: [{ name: 'who' }, { name: 'greeting', default: 'welcome' }],
  params: { temperature: 0.2 },
  ...overrides,
});

async function createTemplate(overrides: Record<string, unknown> = {}) {
  const res = await gql(CREATE, { input: input(overrides) });
  expect(res.body.errors, res.raw).toBeUndefined();
  return res.body.data.createTemplate;
}

describe('templates over GraphQL', () => {
  it('shows template_id and template_version on usage records of templated inferences', async () => {
    const tpl = await createTemplate({ model: 'mock-1' });
    const inferred = await rest.post('/v1/inference', { project_id: projectId, template: { id: tpl.id, variables: { who: 'x' } } });
    expect(inferred.status, inferred.raw).toBe(200);
    const usageKey = await operator.post('/v1/keys', { project_id: projectId, name: uniqueName('usage'), scopes: ['usage:read'] });
    const res = await gql(`{ usage(first: 5) { edges { node { requestId templateId templateVersion } } } }`, {}, { key: usageKey.body.secret });
    expect(res.body.errors, res.raw).toBeUndefined();
    const node = res.body.data.usage.edges.map((e: any) => e.node).find((n: any) => n.requestId === inferred.body.request_id);
    expect(node).toEqual({ requestId: inferred.body.request_id, templateId: tpl.id, templateVersion: 1 });
  });

  it('creates, publishes, lists, reads and renders like REST', async () => {
    const tpl = await createTemplate();
    expect(tpl).toMatchObject({ id: expect.stringMatching(/^tpl_/), projectId, latestVersion: 1, description: null });
    const restView = await rest.get(`/v1/templates/${tpl.id}`);
    expect(restView.body).toMatchObject({ id: tpl.id, name: tpl.name, latest_version: 1 });

    const v2 = await gql(PUBLISH, { id: tpl.id, input: { messages: [{ role: 'system', content: 'Two {{x}}' }], variables: [{ name: 'x', required: false }], model: 'mock-1' } });
    expect(v2.body.errors, v2.raw).toBeUndefined();
    expect(v2.body.data.publishTemplateVersion).toMatchObject({
      templateId: tpl.id,
      version: 2,
      model: 'mock-1',
      params: null,
      messages: [{ role: 'system', content: 'Two {{x}}' }],
      variables: [{ name: 'x', required: false, default: null }],
    });

    const list = await gql(`query($id: ID!) { templateVersions(templateId: $id, first: 1) { edges { cursor node { version } } pageInfo { hasNextPage endCursor } } }`, { id: tpl.id });
    expect(list.body.data.templateVersions).toEqual({ edges: [{ cursor: '2', node: { version: 2 } }], pageInfo: { hasNextPage: true, endCursor: '2' } });
    const next = await gql(`query($id: ID!) { templateVersions(templateId: $id, first: 5, after: "2") { edges { node { version params } } } }`, { id: tpl.id });
    expect(next.body.data.templateVersions.edges).toEqual([{ node: { version: 1, params: { temperature: 0.2 } } }]);

    const one = await gql(`query($id: ID!) { template(id: $id) { latestVersion } templateVersion(templateId: $id, version: 1) { variables { name required default } } }`, { id: tpl.id });
    expect(one.body.data).toEqual({
      template: { latestVersion: 2 },
      templateVersion: { variables: [{ name: 'who', required: true, default: null }, { name: 'greeting', required: true, default: 'welcome' }] },
    });
    const templates = await gql(`{ templates(first: 100) { edges { node { id } } } }`);
    expect(templates.body.data.templates.edges.map((e: any) => e.node.id)).toContain(tpl.id);

    // The same audit rows as REST writes.
    const audit = await rest.get('/v1/audit/events', { query: { project_id: projectId } });
    const mine = audit.body.data.filter((a: any) => a.target_id === tpl.id).map((a: any) => [a.action, a.data]);
    expect(mine).toEqual([
      ['template.publish', { version: 2 }],
      ['template.create', { name: tpl.name, version: 1 }],
    ]);

    const rendered = await gql(RENDER, { id: tpl.id, version: 1, variables: { who: 'Zoe & <co>' } });
    expect(rendered.body.data.renderTemplate).toEqual({ templateId: tpl.id, version: 1, messages: [{ role: 'user', content: 'Hi Zoe & <co>, welcome' }] });
  });

  it('answers template_version_conflict, template_variable_missing and invalid_request with the params REST names', async () => {
    const tpl = await createTemplate();
    expectGqlError(await gql(PUBLISH, { id: tpl.id, input: { version: 1, messages: [{ role: 'user', content: 'x' }] } }), 'template_version_conflict', {
      param: 'version',
      httpStatus: 409,
      path: ['publishTemplateVersion'],
    });
    expectGqlError(await gql(RENDER, { id: tpl.id, variables: {} }), 'template_variable_missing', { param: 'variables.who', httpStatus: 400 });
    expectGqlError(await gql(CREATE, { input: input({ messages: [{ role: 'user', content: '{{nobody}}' }] }) }), 'invalid_request', { param: 'messages', httpStatus: 400 });
    expectGqlError(await gql(CREATE, { input: input({ name: tpl.name }) }), 'invalid_request', { param: 'name', httpStatus: 400 });
    expectGqlError(await gql(CREATE, { input: input({ messages: [{ role: 'robot', content: 'x' }] }) }), 'invalid_request', { param: 'messages[0].role' });
  });

  it("hides another project's templates and needs templates:manage", async () => {
    const tpl = await createTemplate();
    const other = await seedProject(operator, { scopes: ['templates:manage'] });
    await expectGqlHiddenFrom(gql, other.secret, [
      { field: 'template', query: `query($id: ID!) { template(id: $id) { id } }`, variables: { id: tpl.id } },
      { field: 'templateVersion', query: `query($id: ID!) { templateVersion(templateId: $id, version: 1) { version } }`, variables: { id: tpl.id } },
      { field: 'publishTemplateVersion', query: PUBLISH, variables: { id: tpl.id, input: { messages: [{ role: 'user', content: 'x' }] } } },
      { field: 'renderTemplate', query: RENDER, variables: { id: tpl.id, variables: { who: 'x' } } },
    ]);
    const weak = await operator.post('/v1/keys', { project_id: projectId, name: uniqueName('weak'), scopes: ['usage:read'] });
    await expectGqlScopeRequired(gql, weak.body.secret, [
      { field: 'createTemplate', query: CREATE, variables: { input: input() } },
      { field: 'template', query: `query($id: ID!) { template(id: $id) { id } }`, variables: { id: tpl.id } },
      { field: 'renderTemplate', query: RENDER, variables: { id: tpl.id, variables: { who: 'x' } } },
    ]);
  });
});
