import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, Nullable, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';

/** A server's name: what a key's `mcp_tools` entries name before the slash (`name/tool`, `name/*`). */
export const MCP_SERVER_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$';
/** A tool's name as MCP allows it (2025-06-18: 1 to 128 characters, no spaces or slashes here). */
export const MCP_TOOL_NAME_PATTERN = '^[^\\s/*\\u0000-\\u001f\\u007f]{1,128}$';
/** An entry of a key's `mcp_tools`: `server/tool` or `server/*`. */
export const MCP_TOOL_GRANT_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}/(\\*|[^\\s/*\\u0000-\\u001f\\u007f]{1,128})$';
export const MAX_MCP_HEADERS = 32;
export const MAX_MCP_HEADER_VALUE = 8192;
export const MAX_MCP_TOOLS = 256;
/** The highest price per call, in USD. */
export const MAX_MCP_PRICE_USD = 1_000;

const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  pattern: '^[^\\s\\u0000-\\u001f\\u007f]*$',
  description: 'The server\'s Streamable HTTP endpoint: HTTPS; private addresses are refused unless SVC_EGRESS_ALLOWLIST allows them (as webhooks).',
  ...says({
    type: 'must be an HTTPS URL of at most 2048 characters',
    minLength: 'must be a valid absolute URL',
    maxLength: 'must be an HTTPS URL of at most 2048 characters',
    pattern: 'must be a valid absolute URL without spaces or control characters',
  }),
});

const Headers = Type.Record(
  Type.String(),
  // Room for the sealed form (sealHeaderValues runs before the service's check); the service holds values to 8192.
  Type.String({ maxLength: 16384, pattern: '^[^\\r\\n\\u0000]*$', ...says('must be a header value without line breaks, at most 8192 characters') }),
  {
    maxProperties: MAX_MCP_HEADERS,
    description: `Headers sent with every request to the server (e.g. Authorization), at most ${MAX_MCP_HEADERS}. Sealed at rest, never returned: answers show their names only.`,
    ...says({ type: 'must be an object of header names to string values', maxProperties: `must hold at most ${MAX_MCP_HEADERS} headers` }),
  },
);

const ToolsAllowed = Type.Array(
  // The names' pattern is checked by the service (checkToolNames), so that the refusal names the list, not an index.
  Type.String({ maxLength: 128, ...says('must be tool names (1 to 128 characters, no spaces, slashes or *)') }),
  {
    maxItems: MAX_MCP_TOOLS,
    description: 'The tools the gateway exposes of this server; null or absent: every tool the server lists.',
    ...says({ type: 'must be an array of tool names', maxItems: `must list at most ${MAX_MCP_TOOLS} tools` }),
  },
);

const Price = Type.Number({
  minimum: 0,
  maximum: MAX_MCP_PRICE_USD,
  description: 'Charged per tool call against the key\'s and the project\'s budgets, in USD (default 0).',
  ...says({ type: `must be a number from 0 to ${MAX_MCP_PRICE_USD}`, minimum: `must be a number from 0 to ${MAX_MCP_PRICE_USD}`, maximum: `must be a number from 0 to ${MAX_MCP_PRICE_USD}` }),
});

const ServerName = Type.String({
  pattern: MCP_SERVER_NAME_PATTERN,
  description: '1 to 64 letters, digits, `_`, `.` or `-` (starting with a letter or digit), unique in the project; a key\'s mcp_tools name it.',
  ...says('must be 1 to 64 letters, digits, _, . or - starting with a letter or digit'),
});

/** POST /v1/mcp/servers, GraphQL createMcpServer. The service checks besides: https and the address (as webhooks), header names. */
export const CreateMcpServer = Input({
  project_id: ProjectIdField,
  name: ServerName,
  url: Url,
  headers: Type.Optional(Nullable(Headers)),
  tools_allowed: Type.Optional(Nullable(ToolsAllowed)),
  price_per_call_usd: Type.Optional(Price),
});
export type CreateMcpServer = Static<typeof CreateMcpServer>;

/** POST or PATCH /v1/mcp/servers/{server_id}, GraphQL updateMcpServer: the fields given replace the stored ones. */
export const UpdateMcpServer = Input({
  project_id: ProjectIdField,
  name: Type.Optional(ServerName),
  url: Type.Optional(Url),
  headers: Type.Optional(Nullable(Headers, { description: 'Replaces every stored header; null: none.' })),
  tools_allowed: Type.Optional(Nullable(ToolsAllowed)),
  price_per_call_usd: Type.Optional(Price),
});
export type UpdateMcpServer = Static<typeof UpdateMcpServer>;

/** GET /v1/mcp/servers, GraphQL mcpServers. */
export const ListMcpServersQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });
export type ListMcpServersQuery = Static<typeof ListMcpServersQuery>;

export const McpServerIdParams = PathId('server_id', 'The MCP server\'s id (mcs_…).');

/** A key's `mcp_tools` (CONTRACT §20): in CreateKey. */
export const McpToolGrants = Nullable(
  Type.Array(
    // The entries' pattern is checked by the key service (checkToolGrants): the refusal names the list, not an index.
    Type.String({ maxLength: 200, ...says('must be entries of the form server/tool or server/*') }),
    {
      minItems: 1,
      maxItems: MAX_MCP_TOOLS,
      ...says({ type: 'must be a non-empty array of server/tool or server/* entries', minItems: 'must be a non-empty array of server/tool or server/* entries (null: every tool)', maxItems: `must list at most ${MAX_MCP_TOOLS} entries` }),
    },
  ),
  {
    description: 'The MCP tools the key may list and call through /v1/mcp/{server_id}: `server/tool` or `server/*` (the server\'s name). null or absent: every tool its servers allow.',
  },
);

/** The body of POST /v1/mcp/{server_id}: one JSON-RPC message (the MCP SDK reads it; this only refuses what is not one). */
export const McpMessage = Type.Object(
  { jsonrpc: Type.Literal('2.0', says('must be "2.0"')) },
  { additionalProperties: true, description: 'One JSON-RPC 2.0 message of the Model Context Protocol (Streamable HTTP).', ...says({ type: 'must be a JSON-RPC message' }) },
);

const TOOL_NAME = new RegExp(MCP_TOOL_NAME_PATTERN);
const TOOL_GRANT = new RegExp(MCP_TOOL_GRANT_PATTERN);

/** The names a list that is not one of tool names has wrong (`tools_allowed`), or null. */
export const badToolName = (names: readonly string[]): string | null => names.find((n) => !TOOL_NAME.test(n)) ?? null;
/** The first entry of a key's `mcp_tools` that is not `server/tool` or `server/*`, or null. */
export const badToolGrant = (entries: readonly string[]): string | null => entries.find((n) => !TOOL_GRANT.test(n)) ?? null;
