import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { z } from 'zod';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { buildTestApp, type Client, type TestApp } from '../helpers/app.ts';
import { testPki } from '../helpers/https-receiver.ts';
import { egressFetch } from '../../src/domain/mcp/egress-fetch.ts';

/** A local MCP server built with the SDK (McpServer over Streamable HTTP, stateless) on HTTPS signed by the test CA. */
export interface Upstream {
  url: string;
  /** Every tool call it received: the tool, its arguments, the request's headers. */
  calls: { tool: string; args: Record<string, unknown>; headers: IncomingHttpHeaders }[];
  /** The headers of every HTTP request it received. */
  requests: IncomingHttpHeaders[];
  close(): Promise<void>;
}

export async function startUpstream(): Promise<Upstream> {
  const pki = testPki();
  const calls: Upstream['calls'] = [];
  const requests: IncomingHttpHeaders[] = [];
  const build = (headers: IncomingHttpHeaders) => {
    const server = new McpServer({ name: 'local-tools', version: '1.2.3' }, { instructions: 'Local test tools.' });
    server.registerTool('echo', { description: 'Echoes its text.', inputSchema: { text: z.string() } }, async (args) => {
      calls.push({ tool: 'echo', args, headers });
      return { content: [{ type: 'text', text: `echo: ${args.text}` }] };
    });
    server.registerTool('secret_tool', { description: 'Hidden by allow-lists.', inputSchema: {} }, async (args) => {
      calls.push({ tool: 'secret_tool', args, headers });
      return { content: [{ type: 'text', text: 'the secret' }] };
    });
    server.registerTool('fail', { description: 'Always a tool error.', inputSchema: {} }, async (args) => {
      calls.push({ tool: 'fail', args, headers });
      return { content: [{ type: 'text', text: 'it failed' }], isError: true };
    });
    return server;
  };
  const http: Server = createServer({ key: pki.key, cert: pki.cert }, async (req, res) => {
    requests.push(req.headers);
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const server = build(req.headers);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const port = (http.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}/mcp`,
    calls,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

/** The gateway on a real port (the SDK's client speaks HTTP), allowed to reach loopback and trusting the test CA. */
export async function startGateway(env: Record<string, string> = {}): Promise<TestApp & { base: string }> {
  const t = await buildTestApp({ env: { SVC_EGRESS_ALLOWLIST: '127.0.0.1', ...env } });
  // As webhook tests do: loopback only because the allowlist says so; the test CA trusted by this fetch only.
  t.deps.ports.mcp.fetch = egressFetch(t.deps.webhooks.egress, { timeoutMs: 5_000, ca: testPki().caCert });
  const address = await t.app.listen({ host: '127.0.0.1', port: 0 });
  return Object.assign(t, { base: address });
}

/** The SDK's client connected to the gateway's endpoint for the server, with `key` as Bearer. */
export async function mcpClient(base: string, serverId: string, key: string): Promise<McpClient> {
  const c = new McpClient({ name: 'test-client', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(`${base}/v1/mcp/${serverId}`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return c;
}

export async function registerServer(api: Client, body: Record<string, unknown>) {
  const res = await api.post('/v1/mcp/servers', body);
  expect(res.status, res.raw).toBe(200);
  return res.body as { id: string; name: string; header_names: string[]; tools_allowed: string[] | null; price_per_call_usd: number };
}

export async function createKey(api: Client, projectId: string, body: Record<string, unknown>) {
  const res = await api.post('/v1/keys', { project_id: projectId, name: `k-${Math.random().toString(36).slice(2)}`, ...body });
  expect(res.status, res.raw).toBe(200);
  return res.body as { id: string; secret: string; mcp_tools?: string[] };
}
