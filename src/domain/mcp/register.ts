import type { McpServer } from '../../generated/prisma/client.ts';
import type { Ctx } from '../context.ts';
import { createMcpServer } from '../governance/guarded.ts';
import type { McpPorts } from './ports.ts';
import { sealHeaderValues } from './service.ts';

/**
 * POST /v1/mcp/servers and GraphQL createMcpServer: registering a server may be under dual control (guarded resource
 * `mcp_servers`). Header values are sealed before the guard sees the body, so a queued approval stores none in clear.
 */
export function registerMcpServer(ports: McpPorts, ctx: Ctx, raw: unknown): Promise<McpServer> {
  return createMcpServer(ports, ctx, sealHeaderValues(ports, raw));
}
