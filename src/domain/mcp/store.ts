import type { McpServer, Prisma } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';

/** `projectId` undefined: the operator without a project filter (sees every project). */
const inProject = (projectId: string | undefined): Prisma.McpServerWhereInput => (projectId !== undefined ? { projectId } : {});

export function findInProject(tx: Tx, projectId: string | undefined, serverId: string): Promise<McpServer | null> {
  return tx.mcpServer.findFirst({ where: { ...inProject(projectId), id: serverId } });
}

export async function nameTaken(tx: Tx, projectId: string, name: string, exceptId?: string): Promise<boolean> {
  return (await tx.mcpServer.count({ where: { projectId, name, ...(exceptId ? { id: { not: exceptId } } : {}) } })) > 0;
}

export function insertServer(tx: Tx, data: Prisma.McpServerUncheckedCreateInput): Promise<McpServer> {
  return tx.mcpServer.create({ data });
}

export function updateServer(tx: Tx, serverId: string, data: Prisma.McpServerUncheckedUpdateInput): Promise<McpServer> {
  return tx.mcpServer.update({ where: { id: serverId }, data });
}

/** Null when another request deleted it first. */
export async function deleteServer(tx: Tx, projectId: string, serverId: string): Promise<boolean> {
  return (await tx.mcpServer.deleteMany({ where: { projectId, id: serverId } })).count === 1;
}

export function listServers(
  tx: Tx,
  projectId: string | undefined,
  args: { cursor?: { lt: string } | { gt: string }; order: 'asc' | 'desc'; take: number },
): Promise<McpServer[]> {
  return tx.mcpServer.findMany({
    where: { ...inProject(projectId), ...(args.cursor ? { id: args.cursor } : {}) },
    orderBy: { id: args.order },
    take: args.take,
  });
}

export async function serverExists(tx: Tx, projectId: string | undefined, serverId: string): Promise<boolean> {
  return (await tx.mcpServer.count({ where: { ...inProject(projectId), id: serverId } })) > 0;
}

/** The key's `mcp_tools` (null: not narrowed; stored empty). */
export async function toolGrantsOf(tx: Tx, keyId: string): Promise<string[] | null> {
  const tools = (await tx.apiKey.findUnique({ where: { id: keyId }, select: { mcpTools: true } }))?.mcpTools ?? [];
  return tools.length > 0 ? tools : null;
}

/** The last tool calls through a server, newest first (the audit log's mcp.tool.call rows). */
export function recentCalls(tx: Tx, projectId: string, serverId: string, take: number) {
  return tx.auditEvent.findMany({
    where: { projectId, action: 'mcp.tool.call', targetId: serverId },
    orderBy: { id: 'desc' },
    take,
  });
}
