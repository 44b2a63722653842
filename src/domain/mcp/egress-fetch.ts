import { Agent, fetch as undiciFetch } from 'undici';
import type { LookupFunction } from 'node:net';
import type { McpFetch } from './ports.ts';

/**
 * fetch for upstream MCP servers through the egress guard (CONTRACT §20: SSRF rules as webhooks): the address connected
 * to is the one the policy vetted (its `lookup` at connect: no DNS-rebinding window), an IP-literal host is checked
 * before each request, and redirects are refused (a redirect could lead anywhere). `ca`: extra trusted roots (tests).
 */
export function egressFetch(
  egress: { lookup: LookupFunction; assertLiteralAllowed(url: URL): void },
  opts: { timeoutMs: number; ca?: string | Buffer },
): McpFetch {
  let agent: Agent | null = null;
  const dispatcher = () =>
    (agent ??= new Agent({
      keepAliveTimeout: 30_000,
      connections: 16,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      connect: { timeout: opts.timeoutMs, lookup: egress.lookup, ...(opts.ca ? { ca: opts.ca } : {}) },
    }));
  return async (url, init) => {
    const target = new URL(String(url));
    egress.assertLiteralAllowed(target);
    // undici's own fetch (the dispatcher option); its Response is the WHATWG one the MCP SDK reads.
    const res = await undiciFetch(target, { ...(init as object), redirect: 'error', dispatcher: dispatcher() } as Parameters<typeof undiciFetch>[1]);
    return res as unknown as Response;
  };
}
