import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { McpServer } from '../../generated/prisma/client.ts';
import { unixSeconds } from '../../domain/context.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { registerMcpServer } from '../../domain/mcp/register.ts';
import { CreateMcpServer, ListMcpServersQuery, McpMessage, McpServerIdParams, UpdateMcpServer } from '../../domain/mcp/schema.ts';
import { deleteMcpServer, getMcpServer, listMcpServers, serveMcp, updateMcpServer } from '../../domain/mcp/service.ts';
import { stringList } from '../../domain/mcp/tools.ts';
import { Nullable } from '../../domain/schema.ts';
import { ListOf, sendList } from '../list.ts';
import { Unix } from '../response-fields.ts';

/** The MCP server object (CONTRACT §20): header names only, never a value. */
export function presentMcpServer(server: McpServer) {
  return {
    id: server.id,
    object: 'svc.mcp_server' as const,
    project_id: server.projectId,
    name: server.name,
    url: server.url,
    endpoint: `/v1/mcp/${server.id}`,
    header_names: server.headerNames,
    tools_allowed: stringList(server.toolsAllowed),
    price_per_call_usd: microsToUsd(server.priceMicros),
    created_at: unixSeconds(server.createdAt),
    updated_at: unixSeconds(server.updatedAt),
  };
}

export const McpServerObject = Type.Object(
  {
    id: Type.String({ description: 'The server id (mcs_…).' }),
    object: Type.Literal('svc.mcp_server'),
    project_id: Type.String({ description: 'The project it belongs to.' }),
    name: Type.String({ description: 'Its name, unique in the project; a key\'s mcp_tools name it (name/tool).' }),
    url: Type.String({ description: 'The upstream Streamable HTTP endpoint.' }),
    endpoint: Type.String({ description: 'Where clients reach it through the gateway (mcp:use).' }),
    header_names: Type.Array(Type.String(), { description: 'The names of the headers sent upstream; values are sealed and never returned.' }),
    tools_allowed: Nullable(Type.Array(Type.String()), { description: 'The tools exposed; null: every tool the server lists.' }),
    price_per_call_usd: Type.Number({ description: 'Charged per tool call against budgets, in USD.' }),
    created_at: Unix('When the server was registered'),
    updated_at: Unix('When the server was last changed'),
  },
  { description: 'An MCP server behind the gateway (CONTRACT §20).' },
);

const DeletedMcpServer = Type.Object(
  {
    id: Type.String({ description: 'The deleted server\'s id.' }),
    object: Type.Literal('svc.mcp_server'),
    deleted: Type.Boolean({ description: 'Always true.' }),
  },
  { description: 'A deleted MCP server.' },
);

const McpAnswer = Type.Object({}, { additionalProperties: true, description: 'The JSON-RPC answer of the MCP server as the gateway proxies it.' });

/** Only what the SDK's transport reads of the request: never the caller's credentials. */
const PASSED_HEADERS = ['accept', 'content-type', 'mcp-protocol-version', 'mcp-session-id', 'last-event-id'];

function webRequest(req: FastifyRequest): Request {
  const headers = new Headers();
  for (const name of PASSED_HEADERS) {
    const value = req.headers[name];
    if (typeof value === 'string') headers.set(name, value);
  }
  return new Request(`http://gateway${req.url}`, { method: req.method, headers });
}

async function sendWeb(reply: FastifyReply, res: Response): Promise<FastifyReply> {
  reply.code(res.status);
  res.headers.forEach((value, name) => {
    if (name !== 'content-length') reply.header(name, value);
  });
  const text = await res.text();
  return reply.send(text === '' ? undefined : text);
}

export const mcpRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/mcp/servers', { config: { action: 'mcp_server.create' }, schema: { body: CreateMcpServer, response: { 200: McpServerObject } } }, async (req) =>
    presentMcpServer(await registerMcpServer(app.ports.mcp, req.ctx, req.body)),
  );

  app.get('/v1/mcp/servers', { config: { action: 'mcp_server.list' }, schema: { querystring: ListMcpServersQuery, response: { 200: ListOf(McpServerObject) } } }, async (req, reply) =>
    sendList(reply, await listMcpServers(req.ctx, req.query), '/v1/mcp/servers', presentMcpServer),
  );

  app.get('/v1/mcp/servers/:server_id', { config: { action: 'mcp_server.read' }, schema: { params: McpServerIdParams, response: { 200: McpServerObject } } }, async (req) =>
    presentMcpServer(await getMcpServer(req.ctx, req.params.server_id)),
  );

  // Update: POST (Stripe's verb) and PATCH, both partial.
  for (const method of ['POST', 'PATCH'] as const) {
    app.route({
      method,
      url: '/v1/mcp/servers/:server_id',
      config: { action: 'mcp_server.update' },
      schema: { params: McpServerIdParams, body: UpdateMcpServer, response: { 200: McpServerObject } },
      handler: async (req) => presentMcpServer(await updateMcpServer(app.ports.mcp, req.ctx, req.params.server_id, req.body)),
    });
  }

  app.delete('/v1/mcp/servers/:server_id', { config: { action: 'mcp_server.delete' }, schema: { params: McpServerIdParams, response: { 200: DeletedMcpServer } } }, async (req) => {
    const server = await deleteMcpServer(req.ctx, req.params.server_id);
    return { id: server.id, object: 'svc.mcp_server' as const, deleted: true };
  });

  // The Streamable HTTP endpoint (CONTRACT §20), stateless: one JSON-RPC message per POST, answered as JSON.
  app.post(
    '/v1/mcp/:server_id',
    { config: { action: 'mcp.use' }, schema: { params: McpServerIdParams, body: McpMessage, response: { 200: McpAnswer } } },
    async (req, reply) =>
      sendWeb(reply, await serveMcp(app.ports.mcp, req.ctx, req.params.server_id, { request: webRequest(req), message: req.body })),
  );

  // No server-initiated stream and no session to end in stateless mode: the transport's answer (405, Allow: POST).
  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: '/v1/mcp/:server_id',
      config: { action: 'mcp.use' },
      schema: {
        params: McpServerIdParams,
        response: { 405: Type.Null({ description: 'Always, with Allow: POST: stateless Streamable HTTP has no stream to open and no session to end.' }) },
      },
      handler: async (req, reply) => {
        await getMcpServer(req.ctx, req.params.server_id);
        return reply.code(405).header('allow', 'POST').send(undefined as never);
      },
    });
  }
};
