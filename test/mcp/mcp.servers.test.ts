import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type Seeded, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';

let t: TestApp;
let operator: Client;
let seeded: Seeded;
let admin: Client;
const URL_OK = 'https://127.0.0.1:9/mcp';
const SECRET_HEADER = 'Bearer upstream-secret-4f1c9a';

beforeAll(async () => {
  t = await buildTestApp({ env: { SVC_EGRESS_ALLOWLIST: '127.0.0.1' } });
  operator = client(t.app);
  seeded = await seedProject(operator, { scopes: ['governance:manage', 'keys:manage', 'mcp:use', 'audit:read'], limits: { requests_per_minute: 10_000, tokens_per_minute: 1_000_000, burst: 1_000 } });
  admin = client(t.app, seeded.secret);
});
afterAll(() => t.close());

const gql = async (api: Client, query: string, variables: Record<string, unknown> = {}) => {
  const res = await api.post('/graphql', { query, variables });
  expect(res.status, res.raw).toBe(200);
  return res.body;
};

describe('POST /v1/mcp/servers', () => {
  it('registers a server: mcs_ id, header names only, defaults', async () => {
    const res = await admin.post('/v1/mcp/servers', { project_id: seeded.projectId, name: 'files', url: URL_OK, headers: { Authorization: SECRET_HEADER } });
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^mcs_[0-9a-z]{26}$/),
      object: 'svc.mcp_server',
      project_id: seeded.projectId,
      name: 'files',
      url: URL_OK,
      endpoint: `/v1/mcp/${res.body.id}`,
      header_names: ['Authorization'],
      tools_allowed: null,
      price_per_call_usd: 0,
      created_at: Math.floor(t.clock.now() / 1000),
      updated_at: Math.floor(t.clock.now() / 1000),
    });
    expect(res.raw).not.toContain('upstream-secret');
  });

  it('keeps header values sealed at rest and never returns them (get, list, update, audit, GraphQL)', async () => {
    const created = await admin.post('/v1/mcp/servers', { project_id: seeded.projectId, name: 'sealed', url: URL_OK, headers: { 'X-Api-Key': SECRET_HEADER } });
    expect(created.status).toBe(200);
    const row = await t.deps.db.mcpServer.findUnique({ where: { id: created.body.id } });
    expect(row!.headersSealed).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(JSON.stringify(row, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain('upstream-secret');
    expect(t.deps.webhooks.secretBox.open(row!.headersSealed!, row!.id)).toBe(JSON.stringify({ 'X-Api-Key': SECRET_HEADER }));
    const reads = [
      await admin.get(`/v1/mcp/servers/${created.body.id}`),
      await admin.get('/v1/mcp/servers'),
      await admin.patch(`/v1/mcp/servers/${created.body.id}`, { price_per_call_usd: 0.5 }),
      await operator.get('/v1/audit/events', { query: { project_id: seeded.projectId, limit: 100 } }),
    ];
    for (const r of reads) {
      expect(r.status, r.raw).toBe(200);
      expect(r.raw).not.toContain('upstream-secret');
    }
    const g = await gql(admin, `{ mcpServers(first: 50) { edges { node { id headerNames } } } }`);
    expect(JSON.stringify(g)).not.toContain('upstream-secret');
    expect(g.data.mcpServers.edges.map((e: any) => e.node)).toContainEqual({ id: created.body.id, headerNames: ['X-Api-Key'] });
    expect(t.logs.text).not.toContain('upstream-secret');
  });

  it('refuses a private or unallowlisted loopback address, credentials or plain http in the url (SSRF rules of webhooks)', async () => {
    for (const url of ['https://10.0.0.5/mcp', 'https://169.254.169.254/latest', 'https://[::1]/mcp', 'https://192.168.1.1/mcp', 'https://user:pw@127.0.0.1/mcp', 'http://127.0.0.1:9/mcp', 'not a url']) {
      const res = await admin.post('/v1/mcp/servers', { project_id: seeded.projectId, name: 'ssrf', url });
      expect({ url, status: res.status }).toEqual({ url, status: 400 });
      expectError(res, 400, 'invalid_request', 'url');
    }
  });

  it('refuses bad input naming the field', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ name: 'bad/name', url: URL_OK }, 'name'],
      [{ name: 'files', url: URL_OK }, 'name'], // taken in the project
      [{ name: 'h1', url: URL_OK, headers: { Host: 'x' } }, 'headers.Host'],
      [{ name: 'h2', url: URL_OK, headers: { 'bad name': 'x' } }, 'headers.bad name'],
      [{ name: 'h3', url: URL_OK, headers: { 'X-Long': 'a'.repeat(9000) } }, 'headers.X-Long'],
      [{ name: 'h4', url: URL_OK, headers: { 'X-A': 'a', 'x-a': 'b' } }, 'headers.x-a'],
      [{ name: 'p', url: URL_OK, price_per_call_usd: -1 }, 'price_per_call_usd'],
      [{ name: 't', url: URL_OK, tools_allowed: ['a/b'] }, 'tools_allowed'],
      [{ name: 't2', url: URL_OK, tools_allowed: 'echo' }, 'tools_allowed'],
      [{ name: 'u', url: URL_OK, extra: 1 }, 'extra'],
    ];
    for (const [body, param] of cases) expectError(await admin.post('/v1/mcp/servers', { project_id: seeded.projectId, ...body }), 400, 'invalid_request', param);
    expectError(await operator.post('/v1/mcp/servers', { name: 'np', url: URL_OK }), 400, 'missing_project_id', 'project_id');
  });

  it('updates and deletes; a deleted server is 404', async () => {
    const s = (await admin.post('/v1/mcp/servers', { project_id: seeded.projectId, name: 'temp', url: URL_OK })).body;
    const up = await admin.post(`/v1/mcp/servers/${s.id}`, { tools_allowed: ['echo'], price_per_call_usd: 0.25, headers: { 'X-A': '1' } });
    expect(up.status, up.raw).toBe(200);
    expect(up.body).toMatchObject({ tools_allowed: ['echo'], price_per_call_usd: 0.25, header_names: ['X-A'] });
    const cleared = await admin.patch(`/v1/mcp/servers/${s.id}`, { tools_allowed: null, headers: null });
    expect(cleared.body).toMatchObject({ tools_allowed: null, header_names: [] });
    const del = await admin.delete(`/v1/mcp/servers/${s.id}`);
    expect(del.body).toEqual({ id: s.id, object: 'svc.mcp_server', deleted: true });
    expectError(await admin.get(`/v1/mcp/servers/${s.id}`), 404, 'not_found', 'server_id');
    expectError(await admin.delete(`/v1/mcp/servers/${s.id}`), 404, 'not_found', 'server_id');
    const actions = (await operator.get('/v1/audit/events', { query: { project_id: seeded.projectId, limit: 100 } })).body.data
      .filter((a: any) => a.target_id === s.id)
      .map((a: any) => a.action);
    expect(actions.sort()).toEqual(['mcp_server.create', 'mcp_server.delete', 'mcp_server.update', 'mcp_server.update']);
  });
});

describe('security', () => {
  it('another project\'s server is 404 on every route, the gateway endpoint included', async () => {
    const s = (await admin.post('/v1/mcp/servers', { project_id: seeded.projectId, name: 'mine', url: URL_OK })).body;
    const other = await seedProject(operator, { scopes: ['governance:manage', 'mcp:use'] });
    const api = client(t.app, other.secret);
    await expectHiddenFrom(api, [
      { method: 'get', url: `/v1/mcp/servers/${s.id}` },
      { method: 'post', url: `/v1/mcp/servers/${s.id}`, body: { price_per_call_usd: 1 } },
      { method: 'delete', url: `/v1/mcp/servers/${s.id}` },
      {
        method: 'post',
        url: `/v1/mcp/${s.id}`,
        body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        headers: { accept: 'application/json, text/event-stream' },
      },
    ]);
    expect((await api.get('/v1/mcp/servers')).body.data).toEqual([]);
    const g = await gql(api, `query($id: ID!) { mcpServer(id: $id) { id } }`, { id: s.id });
    expect(g.errors[0].extensions.code).toBe('not_found');
  });

  it('server routes need governance:manage; the endpoint needs mcp:use; no key is 401', async () => {
    const s = (await admin.post('/v1/mcp/servers', { project_id: seeded.projectId, name: 'scoped', url: URL_OK })).body;
    const weak = (await admin.post('/v1/keys', { project_id: seeded.projectId, name: 'weak', scopes: ['audit:read'] })).body;
    await expectScopeRequired(client(t.app, weak.secret), [
      { method: 'post', url: '/v1/mcp/servers', body: { project_id: seeded.projectId, name: 'x', url: URL_OK } },
      { method: 'get', url: '/v1/mcp/servers' },
      { method: 'get', url: `/v1/mcp/servers/${s.id}` },
      { method: 'post', url: `/v1/mcp/servers/${s.id}`, body: {} },
      { method: 'delete', url: `/v1/mcp/servers/${s.id}` },
      { method: 'post', url: `/v1/mcp/${s.id}`, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } },
    ]);
    const anonymous = await client(t.app, '').post(`/v1/mcp/${s.id}`, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { key: null });
    expectError(anonymous, 401, 'invalid_api_key');
    expectError(await admin.post(`/v1/mcp/${s.id}`, { id: 1, method: 'tools/list' }), 400, 'invalid_request', 'jsonrpc');
    expectError(await admin.post('/v1/mcp/mcs_nope', { jsonrpc: '2.0', id: 1, method: 'tools/list' }), 404, 'not_found', 'server_id');
  });

  it('mcp:use is a scope like the others: a key cannot grant it without holding it', async () => {
    const manager = (await admin.post('/v1/keys', { project_id: seeded.projectId, name: 'mgr', scopes: ['keys:manage'] })).body;
    expectError(
      await client(t.app, manager.secret).post('/v1/keys', { project_id: seeded.projectId, name: 'user', scopes: ['mcp:use'] }),
      403,
      'insufficient_scope',
      'scopes',
    );
  });

  it('a key narrowed by mcp_tools hands out no tool beyond them; mcp_tools entries are checked', async () => {
    const narrow = (await admin.post('/v1/keys', { project_id: seeded.projectId, name: 'narrow', scopes: ['keys:manage', 'mcp:use'], mcp_tools: ['files/read'] })).body;
    const api = client(t.app, narrow.secret);
    expectError(await api.post('/v1/keys', { project_id: seeded.projectId, name: 'wide', scopes: ['mcp:use'] }), 403, 'insufficient_scope', 'mcp_tools');
    expectError(await api.post('/v1/keys', { project_id: seeded.projectId, name: 'other', scopes: ['mcp:use'], mcp_tools: ['files/*'] }), 403, 'insufficient_scope', 'mcp_tools');
    const ok = await api.post('/v1/keys', { project_id: seeded.projectId, name: 'same', scopes: ['mcp:use'], mcp_tools: ['files/read'] });
    expect(ok.status, ok.raw).toBe(200);
    expectError(await admin.post('/v1/keys', { project_id: seeded.projectId, name: 'bad', scopes: ['mcp:use'], mcp_tools: ['no-slash'] }), 400, 'invalid_request', 'mcp_tools');
    expectError(await admin.post('/v1/keys', { project_id: seeded.projectId, name: 'empty', scopes: ['mcp:use'], mcp_tools: [] }), 400, 'invalid_request', 'mcp_tools');
    // A key without the list answers as before: no mcp_tools field at all.
    const plain = await admin.post('/v1/keys', { project_id: seeded.projectId, name: 'plain', scopes: ['mcp:use'] });
    expect(Object.keys(plain.body)).not.toContain('mcp_tools');
    const g = await gql(admin, `query($id: ID!) { key(id: $id) { mcpTools } }`, { id: narrow.id });
    expect(g.data.key.mcpTools).toEqual(['files/read']);
  });
});

describe('GraphQL twins', () => {
  it('createMcpServer and mcpServers answer as POST and GET /v1/mcp/servers, with the same audit', async () => {
    const viaRest = (await admin.post('/v1/mcp/servers', { project_id: seeded.projectId, name: 'twin-rest', url: URL_OK, tools_allowed: ['echo'], price_per_call_usd: 0.01, headers: { 'X-K': 'v1' } })).body;
    const g = await gql(
      admin,
      `mutation($input: CreateMcpServerInput!, $headers: [McpHeaderInput!]) { createMcpServer(input: $input, headers: $headers) { id projectId name url endpoint headerNames toolsAllowed pricePerCallUsd createdAt updatedAt } }`,
      { input: { projectId: seeded.projectId, name: 'twin-gql', url: URL_OK, toolsAllowed: ['echo'], pricePerCallUsd: 0.01 }, headers: [{ name: 'X-K', value: 'v1' }] },
    );
    const viaGql = g.data.createMcpServer;
    expect(viaGql).toEqual({
      id: expect.stringMatching(/^mcs_/),
      projectId: viaRest.project_id,
      name: 'twin-gql',
      url: viaRest.url,
      endpoint: `/v1/mcp/${viaGql.id}`,
      headerNames: viaRest.header_names,
      toolsAllowed: viaRest.tools_allowed,
      pricePerCallUsd: viaRest.price_per_call_usd,
      createdAt: viaRest.created_at,
      updatedAt: viaRest.updated_at,
    });
    const audits = (await operator.get('/v1/audit/events', { query: { project_id: seeded.projectId, action: 'mcp_server.create', limit: 100 } })).body.data;
    const a = audits.find((x: any) => x.target_id === viaRest.id);
    const b = audits.find((x: any) => x.target_id === viaGql.id);
    expect({ ...b.data, name: 'twin-rest' }).toEqual(a.data);
    const list = await gql(admin, `{ mcpServers(first: 100) { edges { node { id name } } } }`);
    const rest = (await admin.get('/v1/mcp/servers', { query: { limit: 100 } })).body.data;
    expect(list.data.mcpServers.edges.map((e: any) => e.node.id)).toEqual(rest.map((s: any) => s.id));
    // The same refusal through both.
    const dup = await gql(admin, `mutation($input: CreateMcpServerInput!) { createMcpServer(input: $input) { id } }`, { input: { projectId: seeded.projectId, name: 'twin-rest', url: URL_OK } });
    expect(dup.errors[0].extensions).toMatchObject({ code: 'invalid_request', param: 'name' });
  });
});

describe('GraphQL update and delete', () => {
  it('updateMcpServer and deleteMcpServer change and remove as PATCH and DELETE do', async () => {
    const s = (await admin.post('/v1/mcp/servers', { project_id: seeded.projectId, name: 'gql-edit', url: URL_OK })).body;
    const up = await gql(
      admin,
      `mutation($id: ID!, $input: UpdateMcpServerInput!, $headers: [McpHeaderInput!]) { updateMcpServer(id: $id, input: $input, headers: $headers) { id toolsAllowed pricePerCallUsd headerNames } }`,
      { id: s.id, input: { toolsAllowed: ['echo'], pricePerCallUsd: 0.3 }, headers: [{ name: 'X-Token', value: 'tok-secret-77' }] },
    );
    expect(up.data.updateMcpServer).toEqual({ id: s.id, toolsAllowed: ['echo'], pricePerCallUsd: 0.3, headerNames: ['X-Token'] });
    const rest = (await admin.get(`/v1/mcp/servers/${s.id}`)).body;
    expect(rest).toMatchObject({ tools_allowed: ['echo'], price_per_call_usd: 0.3, header_names: ['X-Token'] });
    expect(JSON.stringify(up)).not.toContain('tok-secret-77');
    const del = await gql(admin, `mutation($id: ID!) { deleteMcpServer(id: $id) { id deleted } }`, { id: s.id });
    expect(del.data.deleteMcpServer).toEqual({ id: s.id, deleted: true });
    expectError(await admin.get(`/v1/mcp/servers/${s.id}`), 404, 'not_found', 'server_id');
    const again = await gql(admin, `mutation($id: ID!) { deleteMcpServer(id: $id) { id } }`, { id: s.id });
    expect(again.errors[0].extensions).toMatchObject({ code: 'not_found', param: 'server_id' });
  });
});

describe('dual control', () => {
  it('registering waits for a second key when the project guards mcp_servers; the queued request holds no header value', async () => {
    const p = await seedProject(operator, { scopes: ['governance:manage'] });
    const first = client(t.app, p.secret);
    expect((await first.put(`/v1/projects/${p.projectId}/governance`, { dual_control: ['mcp_servers'] })).status).toBe(200);
    const res = await first.post('/v1/mcp/servers', { project_id: p.projectId, name: 'guarded', url: URL_OK, headers: { Authorization: SECRET_HEADER } });
    expect({ status: res.status, code: res.body.error.code }).toEqual({ status: 403, code: 'dual_control_required' });
    const approvalId = res.headers['x-svc-approval-id'] as string;
    const approval = await t.deps.db.approval.findUnique({ where: { id: approvalId } });
    expect(JSON.stringify(approval)).not.toContain('upstream-secret');
    expect(await t.deps.db.mcpServer.count({ where: { projectId: p.projectId } })).toBe(0);
    const second = (await operator.post('/v1/keys', { project_id: p.projectId, name: 'approver', scopes: ['governance:manage'] })).body;
    const approved = await client(t.app, second.secret).post(`/v1/approvals/${approvalId}/approve`, {});
    expect(approved.status, approved.raw).toBe(200);
    const row = await t.deps.db.mcpServer.findFirst({ where: { projectId: p.projectId } });
    expect(row).toMatchObject({ name: 'guarded', headerNames: ['Authorization'] });
    expect(JSON.parse(t.deps.webhooks.secretBox.open(row!.headersSealed!, row!.id))).toEqual({ Authorization: SECRET_HEADER });
  });
});
