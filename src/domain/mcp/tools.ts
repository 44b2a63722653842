/**
 * Which tools a call may see (CONTRACT §20): the server's `tools_allowed` (null: all it lists), then the key's
 * `mcp_tools` (null: no narrowing), whose entries name the server by its name: `server/tool` or `server/*`.
 */
export function toolAllowed(server: { name: string; toolsAllowed: readonly string[] | null }, grants: readonly string[] | null, tool: string): boolean {
  if (server.toolsAllowed !== null && !server.toolsAllowed.includes(tool)) return false;
  if (grants === null) return true;
  return grants.includes(`${server.name}/*`) || grants.includes(`${server.name}/${tool}`);
}

/** Whether every entry of `child` is allowed by `parent` (a key hands out no tool it may not call itself). */
export function grantsWithin(parent: readonly string[] | null, child: readonly string[] | null): string[] {
  if (parent === null) return [];
  if (child === null) return ['(every tool)'];
  return child.filter((entry) => {
    const [server] = entry.split('/');
    return !(parent.includes(`${server}/*`) || parent.includes(entry));
  });
}

/** A stored JSON list of strings (tools_allowed, mcp_tools), or null. */
export function stringList(value: unknown): string[] | null {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : null;
}
