import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { client, seedProject, type Client, type Seeded, type TestApp } from '../helpers/app.ts';
import { startReceiver, type Receiver } from '../helpers/https-receiver.ts';
import { testWorker } from '../webhooks/support.ts';
import { createKey, mcpClient, registerServer, startGateway, startUpstream, type Upstream } from './support.ts';

let t: TestApp & { base: string };
let upstream: Upstream;
let operator: Client;
let seeded: Seeded;
let admin: Client;
let receiver: Receiver;

beforeAll(async () => {
  upstream = await startUpstream();
  t = await startGateway();
  operator = client(t.app);
  seeded = await seedProject(operator, { scopes: ['governance:manage', 'keys:manage', 'mcp:use', 'audit:read'], limits: { requests_per_minute: 10_000, tokens_per_minute: 1_000_000, burst: 1_000 } });
  admin = client(t.app, seeded.secret);
});
afterAll(async () => {
  await receiver?.close();
  await t?.close();
  await upstream?.close();
});

const auditOf = async (action: string) => {
  const res = await operator.get('/v1/audit/events', { query: { project_id: seeded.projectId, action, limit: 100 } });
  expect(res.status, res.raw).toBe(200);
  return res.body.data as any[];
};

describe('the MCP gateway, through the SDK client', () => {
  it('proxies initialize, tools/list and tools/call to the registered server', async () => {
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'local', url: upstream.url, headers: { Authorization: 'Bearer upstream-token' } });
    const c = await mcpClient(t.base, server.id, seeded.secret);
    expect(c.getServerVersion()).toMatchObject({ name: 'local-tools', version: '1.2.3' });
    expect(c.getInstructions()).toBe('Local test tools.');
    const { tools } = await c.listTools();
    expect(tools.map((x) => x.name).sort()).toEqual(['echo', 'fail', 'secret_tool']);
    const result = await c.callTool({ name: 'echo', arguments: { text: 'hello' } });
    expect(result.content).toEqual([{ type: 'text', text: 'echo: hello' }]);
    const call = upstream.calls.at(-1)!;
    expect(call).toMatchObject({ tool: 'echo', args: { text: 'hello' } });
    // The sealed header reaches the server; the caller's key does not.
    expect(call.headers.authorization).toBe('Bearer upstream-token');
    expect(JSON.stringify(upstream.requests)).not.toContain(seeded.secret);
    await c.close();

    const audit = (await auditOf('mcp.tool.call'))[0];
    expect(audit.target_id).toBe(server.id);
    expect(audit.data).toMatchObject({ server_id: server.id, server: 'local', tool: 'echo', key_id: seeded.keyId, outcome: 'ok', status: 200 });
    expect(typeof audit.data.duration_ms).toBe('number');
  });

  it('hides a tool outside the key\'s mcp_tools and refuses calling it with a JSON-RPC error', async () => {
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'narrowed', url: upstream.url });
    const key = await createKey(admin, seeded.projectId, { scopes: ['mcp:use'], mcp_tools: ['narrowed/echo', 'other/*'] });
    expect(key.mcp_tools).toEqual(['narrowed/echo', 'other/*']);
    const c = await mcpClient(t.base, server.id, key.secret);
    expect((await c.listTools()).tools.map((x) => x.name)).toEqual(['echo']);
    const before = upstream.calls.length;
    const err = await c.callTool({ name: 'secret_tool', arguments: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32602);
    expect((err as McpError).data).toMatchObject({ code: 'insufficient_scope' });
    expect(upstream.calls.length).toBe(before);
    await c.close();
    const refused = (await auditOf('mcp.tool.call')).find((a) => a.data.tool === 'secret_tool' && a.data.server === 'narrowed');
    expect(refused.data).toMatchObject({ outcome: 'refused', status: 403, code: 'insufficient_scope', key_id: key.id });
  });

  it('hides and refuses what the server\'s tools_allowed leaves out, whatever the key', async () => {
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'only-echo', url: upstream.url, tools_allowed: ['echo'] });
    const c = await mcpClient(t.base, server.id, seeded.secret);
    expect((await c.listTools()).tools.map((x) => x.name)).toEqual(['echo']);
    const err = await c.callTool({ name: 'fail', arguments: {} }).catch((e: unknown) => e);
    expect((err as McpError).code).toBe(-32602);
    await c.close();
  });

  it('refuses a key without mcp:use before any MCP message (HTTP 403 insufficient_scope)', async () => {
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'scoped', url: upstream.url });
    const key = await createKey(admin, seeded.projectId, { scopes: ['audit:read'] });
    const err = await mcpClient(t.base, server.id, key.secret).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StreamableHTTPError);
    expect((err as StreamableHTTPError).code).toBe(403);
    expect((err as Error).message).toContain('insufficient_scope');
  });

  it('charges the price per call against budgets and refuses a priced call once the budget is spent', async () => {
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'priced', url: upstream.url, price_per_call_usd: 0.5 });
    const key = await createKey(admin, seeded.projectId, { scopes: ['mcp:use'], budget_usd: 1 });
    const c = await mcpClient(t.base, server.id, key.secret);
    expect((await c.callTool({ name: 'echo', arguments: { text: 'one' } })).isError).toBeFalsy();
    // A tool's own error (isError) is work the server did: charged too.
    expect((await c.callTool({ name: 'fail', arguments: {} })).isError).toBe(true);
    const before = upstream.calls.length;
    const err = await c.callTool({ name: 'echo', arguments: { text: 'three' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).data).toMatchObject({ code: 'budget_exceeded' });
    expect((err as McpError).message).toContain('budget');
    expect(upstream.calls.length).toBe(before);
    await c.close();
    const spend = await t.deps.db.$queryRaw<{ micros: bigint }[]>`SELECT spent_micros AS micros FROM budget_spend WHERE scope = ${'key:' + key.id}`;
    expect(spend.map((r) => Number(r.micros))).toEqual([1_000_000]);
    const calls = (await auditOf('mcp.tool.call')).filter((a) => a.data.server === 'priced').map((a) => [a.data.tool, a.data.outcome, a.data.status, a.data.price_usd]);
    expect(calls).toEqual([
      ['echo', 'budget_exceeded', 429, 0],
      ['fail', 'tool_error', 200, 0.5],
      ['echo', 'ok', 200, 0.5],
    ]);
  });

  it('emits mcp.tool.called to a subscribed webhook, signed like every event', async () => {
    receiver = await startReceiver();
    const hook = await admin.post('/v1/webhooks', { project_id: seeded.projectId, url: receiver.url, events: ['mcp.tool.called'] });
    expect(hook.status, hook.raw).toBe(200);
    receiver.secret = hook.body.secret;
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'evented', url: upstream.url, price_per_call_usd: 0.001 });
    const c = await mcpClient(t.base, server.id, seeded.secret);
    await c.callTool({ name: 'echo', arguments: { text: 'evt' } });
    await c.close();
    await testWorker(t).runDue();
    const [receipt] = await receiver.waitFor(1);
    expect(receipt!.verifyError).toBeNull();
    expect(receipt!.event).toMatchObject({
      type: 'mcp.tool.called',
      project_id: seeded.projectId,
      data: { server_id: server.id, server: 'evented', tool: 'echo', key_id: seeded.keyId, outcome: 'ok', price_usd: 0.001 },
    });
    expect(typeof receipt!.event!.data.duration_ms).toBe('number');
    expect(receipt!.event!.data.request_id).toMatch(/^req_/);
  });

  it('redacts PII in arguments and results when the project redacts', async () => {
    const p = await seedProject(operator, { scopes: ['governance:manage', 'mcp:use'] });
    const api = client(t.app, p.secret);
    expect((await api.put(`/v1/projects/${p.projectId}/pii`, { redact: true })).status).toBe(200);
    const server = await registerServer(api, { project_id: p.projectId, name: 'private', url: upstream.url });
    const c = await mcpClient(t.base, server.id, p.secret);
    const result = await c.callTool({ name: 'echo', arguments: { text: 'write to jane.doe@example.com' } });
    expect(upstream.calls.at(-1)!.args).toEqual({ text: 'write to [EMAIL_1]' });
    expect(result.content).toEqual([{ type: 'text', text: 'echo: write to [EMAIL_1]' }]);
    await c.close();
  });

  it('refuses a call whose redaction runs past SVC_PII_TIMEOUT_MS (JSON-RPC error pii_redaction_failed); the server is not called', async () => {
    const p = await seedProject(operator, { scopes: ['governance:manage', 'mcp:use', 'audit:read'] });
    const api = client(t.app, p.secret);
    expect((await api.put(`/v1/projects/${p.projectId}/pii`, { redact: true })).status).toBe(200);
    const server = await registerServer(api, { project_id: p.projectId, name: 'slow-redaction', url: upstream.url, price_per_call_usd: 0.25 });
    const c = await mcpClient(t.base, server.id, p.secret);
    const ports = t.deps.ports.mcp;
    let now = 0;
    ports.monotonicNow = () => (now += 60_000); // every look at the clock is a minute later
    const before = upstream.calls.length;
    let err: unknown;
    try {
      err = await c.callTool({ name: 'echo', arguments: { text: 'write to jane.doe@example.com' } }).catch((e: unknown) => e);
    } finally {
      delete ports.monotonicNow;
    }
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32000);
    expect((err as McpError).data).toMatchObject({ code: 'pii_redaction_failed', request_id: expect.stringMatching(/^req_/) });
    expect(upstream.calls.length).toBe(before);
    // Redaction runs again (now in time) on the next call.
    expect((await c.callTool({ name: 'echo', arguments: { text: 'write to jane.doe@example.com' } })).content).toEqual([{ type: 'text', text: 'echo: write to [EMAIL_1]' }]);
    await c.close();
    const audit = await client(t.app).get('/v1/audit/events', { query: { project_id: p.projectId, action: 'mcp.tool.call', limit: 10 } });
    // Not charged, no mcp.tool.called: the server never saw it.
    expect(audit.body.data.map((a: any) => [a.data.outcome, a.data.status, a.data.code, a.data.price_usd])).toEqual([
      ['ok', 200, null, 0.25],
      ['pii_redaction_failed', 422, 'pii_redaction_failed', 0],
    ]);
    const events = await t.deps.db.event.findMany({ where: { projectId: p.projectId, type: 'mcp.tool.called' } });
    expect(events).toHaveLength(1);
  });

  it('counts each MCP request against the request window (429 rate_limit_exceeded over it)', async () => {
    const p = await seedProject(operator, { scopes: ['governance:manage', 'mcp:use'], limits: { requests_per_minute: 5, tokens_per_minute: 100_000, burst: 0 } });
    const server = await registerServer(operator, { project_id: p.projectId, name: 'limited', url: upstream.url });
    // initialize, notifications/initialized and the client's GET for a stream (405) are requests too: 3 of the 5.
    const c = await mcpClient(t.base, server.id, p.secret);
    const outcomes: unknown[] = [];
    for (let i = 0; i < 4; i++) outcomes.push(await c.callTool({ name: 'echo', arguments: { text: `n${i}` } }).then(() => 'ok', (e: unknown) => e));
    expect(outcomes.slice(0, 2)).toEqual(['ok', 'ok']);
    const err = outcomes[2];
    expect(err).toBeInstanceOf(StreamableHTTPError);
    expect((err as StreamableHTTPError).code).toBe(429);
    expect((err as Error).message).toContain('rate_limit_exceeded');
    await c.close();
  });

  it('answers a JSON-RPC error and audits upstream_error when the server is unreachable', async () => {
    const dead = await startUpstream();
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'gone', url: dead.url });
    await dead.close();
    const c = await mcpClient(t.base, server.id, seeded.secret);
    const listErr = await c.listTools().catch((e: unknown) => e);
    expect(listErr).toBeInstanceOf(McpError);
    expect((listErr as McpError).data).toMatchObject({ code: 'upstream_error' });
    const callErr = await c.callTool({ name: 'echo', arguments: { text: 'x' } }).catch((e: unknown) => e);
    expect(callErr).toBeInstanceOf(McpError);
    await c.close();
    const audit = (await auditOf('mcp.tool.call')).find((a) => a.data.server === 'gone');
    expect(audit.data).toMatchObject({ outcome: 'upstream_error', status: 502 });
  });

  it('lists a server\'s tools and its recent calls for the console (GraphQL)', async () => {
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'console', url: upstream.url, tools_allowed: ['echo', 'fail'] });
    const c = await mcpClient(t.base, server.id, seeded.secret);
    await c.callTool({ name: 'echo', arguments: { text: 'c' } });
    await c.close();
    const res = await admin.post('/graphql', {
      query: `query($id: ID!) { mcpServer(id: $id) { name tools { name exposed } recentCalls(limit: 5) { tool outcome status keyId durationMs } } }`,
      variables: { id: server.id },
    });
    expect(res.body.errors).toBeUndefined();
    const s = res.body.data.mcpServer;
    expect(s.tools.sort((a: any, b: any) => a.name.localeCompare(b.name))).toEqual([
      { name: 'echo', exposed: true },
      { name: 'fail', exposed: true },
      { name: 'secret_tool', exposed: false },
    ]);
    expect(s.recentCalls).toEqual([{ tool: 'echo', outcome: 'ok', status: 200, keyId: seeded.keyId, durationMs: expect.any(Number) }]);
  });

  it('answers a plain JSON-RPC POST as the guide\'s curl sends it', async () => {
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'curl', url: upstream.url });
    const res = await fetch(`${t.base}/v1/mcp/${server.id}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${seeded.secret}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'curl' } } }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(res.headers.get('x-svc-request-id')).toMatch(/^req_/);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(await res.json()).toEqual({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'echo: curl' }] } });
  });

  it('GET and DELETE on the endpoint are 405 (stateless: no stream, no session)', async () => {
    const server = await registerServer(admin, { project_id: seeded.projectId, name: 'stateless', url: upstream.url });
    for (const method of ['GET', 'DELETE'] as const) {
      const res = await fetch(`${t.base}/v1/mcp/${server.id}`, { method, headers: { authorization: `Bearer ${seeded.secret}` } });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
    }
  });
});
