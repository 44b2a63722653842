import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpFetch } from './ports.ts';

/**
 * The MCP side of the gateway, loaded on first use (the SDK and its schema libraries stay out of processes that never
 * serve MCP). Built on the official SDK only: a Server with the Web-standard Streamable HTTP transport answers the
 * client, a Client with the Streamable HTTP client transport reaches the upstream server. Stateless: every HTTP request
 * gets its own Server, transport and upstream connection (no Mcp-Session-Id; any replica answers any request).
 */

export const GATEWAY_INFO = { name: 'svc-mcp-gateway', version: '1' } as const;

/** A refusal the gateway answers as a JSON-RPC error (never an isError tool result). */
export class McpRefusal extends Error {
  constructor(
    readonly rpcCode: number,
    message: string,
    readonly data: Record<string, unknown>,
  ) {
    super(message);
  }
}

export interface ProxyTarget {
  url: URL;
  headers: Record<string, string>;
  fetch: McpFetch;
  timeoutMs: number;
}

export interface ProxyPolicy {
  /** Whether the caller may see and call this tool. */
  visible(tool: string): boolean;
  /** Runs one call: `forward` reaches the server; throws McpRefusal to refuse. */
  call(tool: string, args: Record<string, unknown> | undefined, forward: (args: Record<string, unknown> | undefined) => Promise<CallToolResult>): Promise<CallToolResult>;
}

/** Thrown by forward when the server could not be reached or answered with a JSON-RPC error. */
export class UpstreamFailure extends Error {
  constructor(
    message: string,
    readonly rpc: McpError | null,
  ) {
    super(message);
  }
}

function upstream(target: ProxyTarget) {
  let client: Client | null = null;
  let failed: UpstreamFailure | null = null;
  const connect = async (): Promise<Client> => {
    if (client) return client;
    if (failed) throw failed;
    const c = new Client({ name: GATEWAY_INFO.name, version: GATEWAY_INFO.version });
    const transport = new StreamableHTTPClientTransport(target.url, {
      fetch: target.fetch,
      requestInit: { headers: target.headers, redirect: 'error' },
    });
    try {
      await c.connect(transport, { timeout: target.timeoutMs });
    } catch (err) {
      await c.close().catch(() => {});
      failed = new UpstreamFailure(`The MCP server could not be reached: ${(err as Error).message}`, err instanceof McpError ? err : null);
      throw failed;
    }
    client = c;
    return c;
  };
  return { connect, close: async () => client?.close().catch(() => {}) };
}

const rpcError = (err: unknown): McpError => {
  if (err instanceof McpRefusal) return new McpError(err.rpcCode, err.message, err.data);
  if (err instanceof UpstreamFailure) return err.rpc ?? new McpError(ErrorCode.InternalError, err.message, { code: 'upstream_error' });
  if (err instanceof McpError) return err;
  throw err;
};

/** Whether a message (or a batch) is `initialize`: the upstream's identity is then needed before the Server is built. */
function isInitialize(message: unknown): boolean {
  const messages = Array.isArray(message) ? message : [message];
  return messages.some((m) => typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'initialize');
}

/**
 * Answers one Streamable HTTP request (POST of one JSON-RPC message) for `target`, filtered by `policy`. `initialize`
 * is proxied: the upstream is initialized and its name, version and instructions are what the client sees (the
 * gateway offers tools only). tools/list hides what the policy hides; tools/call goes through the policy.
 */
export async function serveMcpRequest(request: Request, message: unknown, target: ProxyTarget, policy: ProxyPolicy): Promise<Response> {
  const up = upstream(target);
  try {
    let info: { name: string; version: string } = { ...GATEWAY_INFO };
    let instructions: string | undefined;
    if (isInitialize(message)) {
      // An upstream that does not answer leaves the gateway's own identity: its tools/list and tools/call then fail
      // with the upstream's error (the Server's initialize itself cannot fail).
      const c = await up.connect().catch((err: unknown) => {
        if (err instanceof UpstreamFailure) return null;
        throw err;
      });
      const v = c?.getServerVersion();
      if (v) info = { name: v.name, version: v.version };
      instructions = c?.getInstructions();
    }
    const server = new Server(info, { capabilities: { tools: {} }, ...(instructions ? { instructions } : {}) });
    server.setRequestHandler(ListToolsRequestSchema, async (req) => {
      try {
        const c = await up.connect();
        const res = await c.listTools(req.params, { timeout: target.timeoutMs }).catch((err: unknown) => {
          throw new UpstreamFailure(`The MCP server refused tools/list: ${(err as Error).message}`, err instanceof McpError ? err : null);
        });
        return { ...res, tools: res.tools.filter((t: Tool) => policy.visible(t.name)) };
      } catch (err) {
        throw rpcError(err);
      }
    });
    server.setRequestHandler(CallToolRequestSchema, async (req) => {
      try {
        return await policy.call(req.params.name, req.params.arguments, async (args) => {
          const c = await up.connect();
          try {
            return (await c.callTool({ ...req.params, arguments: args }, undefined, { timeout: target.timeoutMs })) as CallToolResult;
          } catch (err) {
            throw new UpstreamFailure(`The MCP server failed the call: ${(err as Error).message}`, err instanceof McpError ? err : null);
          }
        });
      } catch (err) {
        throw rpcError(err);
      }
    });
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    try {
      return await transport.handleRequest(request, { parsedBody: message });
    } finally {
      await server.close().catch(() => {});
    }
  } finally {
    await up.close();
  }
}

/** The server's tools as it lists them (every page), for the console: the gateway's own view, not a key's. */
export async function listUpstreamTools(target: ProxyTarget): Promise<Tool[]> {
  const up = upstream(target);
  try {
    const c = await up.connect();
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 20; page++) {
      const res = await c.listTools(cursor ? { cursor } : undefined, { timeout: target.timeoutMs });
      tools.push(...res.tools);
      cursor = res.nextCursor;
      if (!cursor) break;
    }
    return tools;
  } finally {
    await up.close();
  }
}
