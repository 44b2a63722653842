/** The spec's scope table (§5). */
export const SCOPES = [
  'inference:read',
  'inference:write',
  'models:read',
  'usage:read',
  'keys:manage',
  'budgets:manage',
  'rag:write',
  'templates:manage',
  'audit:read',
  'evals:write',
  'governance:manage',
  'dev:read',
  'dev:write',
  'legal:read',
  'legal:write',
  'ops:read',
  'ops:write',
  'risk:read',
  'risk:write',
  'risk:approve',
  // CONTRACT §20, beyond the spec's table: list and call tools through the MCP gateway (/v1/mcp/{server_id}).
  'mcp:use',
] as const;

export type Scope = (typeof SCOPES)[number];

const known = new Set<string>(SCOPES);
export const isScope = (s: string): s is Scope => known.has(s);
