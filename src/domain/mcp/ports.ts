import type { BudgetPorts } from '../budgets/ports.ts';
import type { ProjectReader } from '../projects/ports.ts';

/** The egress guard of webhooks (kernel/egress.ts): the same SSRF rules for MCP servers. */
export interface McpEgress {
  /** Throws EgressRefused: scheme, credentials, private or loopback addresses unless SVC_EGRESS_ALLOWLIST allows them. */
  vetUrl(url: string): Promise<unknown>;
  /** An IP-literal host checked again before each call (the connect step only vets names it resolves). */
  assertLiteralAllowed(url: URL): void;
}

/** Header values at rest: AES-256-GCM bound to the server id (kernel/secret-box.ts). */
export interface McpHeaderBox {
  seal(plaintext: string, aad: string): string;
  open(sealed: string, aad: string): string;
}

/** fetch for the upstream MCP servers: every connection through the egress guard's vetted lookup, no redirects. */
export type McpFetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** What the MCP gateway needs from outside the domain. */
export interface McpPorts {
  egress: McpEgress;
  secretBox: McpHeaderBox;
  /** Spend of priced tools: the budget check before a call, the month counters after it. */
  budgets: BudgetPorts;
  /** The project's PII setting (the project cache). */
  projects: ProjectReader;
  /** Replaceable (tests trust their own CA through it). */
  fetch: McpFetch;
  /** SVC_PII_TIMEOUT_MS: how long redacting one call's arguments or result may take. */
  piiTimeoutMs: number;
  /** The clock redaction's deadline reads (default performance.now; replaceable in tests). */
  monotonicNow?: () => number;
  /** How long one upstream request may take. */
  upstreamTimeoutMs: number;
}
