import type { McpServer } from '../generated/prisma/client.ts';
import { microsToUsd } from '../kernel/money.ts';
import { registerMcpServer } from '../domain/mcp/register.ts';
import { CreateMcpServer, UpdateMcpServer } from '../domain/mcp/schema.ts';
import { deleteMcpServer, getMcpServer, listMcpServers, listServerTools, recentMcpCalls, updateMcpServer, type McpCall, type McpToolInfo } from '../domain/mcp/service.ts';
import { stringList } from '../domain/mcp/tools.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { inputTypeFrom, listFilters, serviceInput } from './inputs.ts';

const McpToolRef = builder.objectRef<McpToolInfo>('McpTool').implement({
  description: 'A tool as the MCP server lists it.',
  fields: (t) => ({
    name: t.exposeString('name'),
    description: t.exposeString('description', { nullable: true }),
    exposed: t.exposeBoolean('exposed', { description: 'Whether the server\'s toolsAllowed lets keys see it (a key\'s mcpTools may narrow it further).' }),
  }),
});

const McpToolCallRef = builder.objectRef<McpCall>('McpToolCall').implement({
  description: 'One tool call through the gateway, as the audit log recorded it (mcp.tool.call).',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The audit entry (aud_…).' }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    tool: t.exposeString('tool'),
    keyId: t.exposeID('keyId', { nullable: true }),
    durationMs: t.exposeInt('durationMs'),
    outcome: t.exposeString('outcome', { description: 'ok, tool_error, refused, budget_exceeded, pii_redaction_failed or upstream_error.' }),
    status: t.exposeInt('status', { description: 'The HTTP status the outcome stands for (200, 403, 429, 422, 502).' }),
    code: t.exposeString('code', { nullable: true, description: 'The svc error code of a refusal (insufficient_scope, budget_exceeded, …).' }),
  }),
});

export const McpServerRef = builder.prismaObject('McpServer', {
  description: 'An MCP server behind the gateway (CONTRACT §20). Header values are sealed and never returned.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    name: t.exposeString('name'),
    url: t.exposeString('url'),
    endpoint: t.string({ resolve: (s) => `/v1/mcp/${s.id}` }),
    headerNames: t.exposeStringList('headerNames'),
    toolsAllowed: t.stringList({ nullable: true, resolve: (s) => stringList(s.toolsAllowed) }),
    pricePerCallUsd: t.float({ resolve: (s) => microsToUsd(s.priceMicros) }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds' }),
    tools: t.field({
      type: [McpToolRef],
      authScopes: { action: 'mcp_server.read' },
      description: 'The tools the server lists now (asks the server).',
      resolve: (s, _args, { ctx, ports }) => listServerTools(ports.mcp, ctx, s.id),
    }),
    recentCalls: t.field({
      type: [McpToolCallRef],
      authScopes: { action: 'mcp_server.read' },
      description: 'The last tool calls through the gateway, newest first (from the audit log).',
      args: { limit: t.arg.int({ description: '1 to 100, default 20.' }) },
      resolve: (s, args, { ctx }) => recentMcpCalls(ctx, s.id, args.limit ?? 20),
    }),
  }),
});

const McpHeaderInput = builder.inputType('McpHeaderInput', {
  description: 'A header sent to the MCP server (its value is sealed at rest and never returned).',
  fields: (t) => ({ name: t.string({ required: true }), value: t.string({ required: true }) }),
});

const CreateMcpServerInput = inputTypeFrom('CreateMcpServerInput', CreateMcpServer, { omit: ['headers'] });
const UpdateMcpServerInput = inputTypeFrom('UpdateMcpServerInput', UpdateMcpServer, { omit: ['headers'] });

/** GraphQL's headers (a list: header names are not field names) as REST's object; undefined: not given. */
const headersOf = (headers: readonly { name: string; value: string }[] | null | undefined) =>
  headers === undefined ? {} : { headers: headers === null ? null : Object.fromEntries(headers.map((h) => [h.name, h.value])) };

const DeletedMcpServerRef = builder.objectRef<McpServer>('DeletedMcpServer').implement({
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.boolean({ resolve: () => true }) }),
});

builder.queryFields((t) => ({
  mcpServers: t.connection(
    {
      type: McpServerRef,
      nullable: true,
      authScopes: { action: 'mcp_server.list' },
      description: 'Newest first, as GET /v1/mcp/servers.',
      args: { projectId: t.arg.id() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listMcpServers(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'McpServerConnection' },
    { name: 'McpServerEdge' },
  ),
  mcpServer: t.field({
    type: McpServerRef,
    nullable: true,
    authScopes: { action: 'mcp_server.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getMcpServer(ctx, String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  createMcpServer: t.field({
    type: McpServerRef,
    nullable: true,
    authScopes: { action: 'mcp_server.create' },
    description: 'As POST /v1/mcp/servers: HTTPS, SSRF rules of webhooks; may be under dual control (mcp_servers). Audits mcp_server.create.',
    args: { input: t.arg({ type: CreateMcpServerInput, required: true }), headers: t.arg({ type: [McpHeaderInput] }) },
    resolve: (_root, args, { ctx, ports }) =>
      registerMcpServer(ports.mcp, ctx, { ...(serviceInput(args.input) as object), ...headersOf(args.headers) }),
  }),
  updateMcpServer: t.field({
    type: McpServerRef,
    nullable: true,
    authScopes: { action: 'mcp_server.update' },
    description: 'As POST/PATCH /v1/mcp/servers/{server_id}: the fields given replace the stored ones (headers: all of them; null: none).',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateMcpServerInput, required: true }), headers: t.arg({ type: [McpHeaderInput] }) },
    resolve: (_root, args, { ctx, ports }) =>
      updateMcpServer(ports.mcp, ctx, String(args.id), { ...(serviceInput(args.input) as object), ...headersOf(args.headers) }),
  }),
  deleteMcpServer: t.field({
    type: DeletedMcpServerRef,
    nullable: true,
    authScopes: { action: 'mcp_server.delete' },
    description: 'As DELETE /v1/mcp/servers/{server_id}. Audits mcp_server.delete.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => deleteMcpServer(ctx, String(args.id)),
  }),
}));
