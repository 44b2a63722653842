import { performance } from 'node:perf_hooks';
import { Prisma, type McpServer } from '../../generated/prisma/client.ts';
import { isUniqueViolation } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { EgressRefused } from '../../kernel/egress.ts';
import { microsToUsd, usdToMicros } from '../../kernel/money.ts';
import { recordAudit } from '../audit/service.ts';
import { assertWithinBudget, applySpend, chargeSpend, periodOf } from '../budgets/service.ts';
import { ownTransaction, addressed, requireProjectId, visibleProjectId, type Ctx, type Checked } from '../context.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { paginate, type Page } from '../pagination.ts';
import { loadPiiParsers, PiiRedaction } from '../privacy/pii.ts';
import { parseInput } from '../validation.ts';
import type { McpPorts } from './ports.ts';
import { badToolName, CreateMcpServer, MAX_MCP_HEADER_VALUE, ListMcpServersQuery, UpdateMcpServer } from './schema.ts';
import * as store from './store.ts';
import { stringList, toolAllowed } from './tools.ts';

const serverNotFound = () => new SvcError('not_found', { param: 'server_id', message: 'No such MCP server.' });
const nameConflict = () => invalid('name', 'An MCP server with this name already exists in the project.');

/**
 * Header values on their way to the service, sealed (`svc-sealed:…`, bound to the header's name): a registration under
 * dual control is stored as a pending approval with its body, and the body then holds no secret in clear.
 */
const SEALED_PREFIX = 'svc-sealed:';
const pendingAad = (name: string) => `mcp-header:${name.toLowerCase()}`;

/** Names a server's headers may not use: the transport's own (Streamable HTTP) and hop-by-hop ones. */
const RESERVED_HEADERS = new Set([
  'accept', 'content-type', 'content-length', 'host', 'connection', 'transfer-encoding', 'keep-alive', 'upgrade', 'te',
  'trailer', 'proxy-authorization', 'proxy-connection', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id',
]);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

/** The body with its header values sealed (see SEALED_PREFIX); anything else is left for the schema to judge. */
export function sealHeaderValues(ports: Pick<McpPorts, 'secretBox'>, raw: unknown): unknown {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return raw;
  const headers = (raw as { headers?: unknown }).headers;
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) return raw;
  const sealed = Object.fromEntries(
    Object.entries(headers as Record<string, unknown>).map(([name, value]) => [
      name,
      typeof value === 'string' && !value.startsWith(SEALED_PREFIX) ? SEALED_PREFIX + ports.secretBox.seal(value, pendingAad(name)) : value,
    ]),
  );
  return { ...(raw as object), headers: sealed };
}

/** The header names checked and the values opened (a sealed value the gateway did not seal is refused). */
function openHeaders(ports: Pick<McpPorts, 'secretBox'>, headers: Record<string, string> | null | undefined): Record<string, string> | null {
  if (!headers) return null;
  const out: Record<string, string> = {};
  const seen = new Set<string>();
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!TOKEN.test(name)) throw invalid(`headers.${name}`, `headers.${name} is not a valid header name.`);
    if (RESERVED_HEADERS.has(lower)) throw invalid(`headers.${name}`, `headers.${name} is set by the gateway and cannot be configured.`);
    if (seen.has(lower)) throw invalid(`headers.${name}`, `headers.${name} is given twice (header names ignore case).`);
    seen.add(lower);
    let plain = value;
    if (value.startsWith(SEALED_PREFIX)) {
      try {
        plain = ports.secretBox.open(value.slice(SEALED_PREFIX.length), pendingAad(name));
      } catch {
        throw invalid(`headers.${name}`, `headers.${name} could not be read.`);
      }
    }
    if (plain.length > MAX_MCP_HEADER_VALUE || /[\r\n\u0000]/.test(plain)) {
      throw invalid(`headers.${name}`, `headers.${name} must be a header value without line breaks, at most ${MAX_MCP_HEADER_VALUE} characters.`);
    }
    out[name] = plain;
  }
  return out;
}

/** https and a valid URL (no DNS), then the egress guard (CONTRACT §6 rules, as webhooks). */
async function vetUrl(ports: McpPorts, url: string): Promise<string> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('url', 'url must be a valid absolute URL.');
  }
  if (parsed.protocol !== 'https:') throw invalid('url', 'url must use https.');
  try {
    await ports.egress.vetUrl(url);
  } catch (err) {
    if (err instanceof EgressRefused) throw invalid('url', err.message);
    throw err;
  }
  return url;
}

function checkToolNames(names: readonly string[] | null | undefined): void {
  const bad = names ? badToolName(names) : null;
  if (bad !== null) throw invalid('tools_allowed', `tools_allowed must be tool names (1 to 128 characters, no spaces, slashes or *): ${JSON.stringify(bad)} is not.`);
}

function priceMicros(usd: number | undefined): bigint | undefined {
  if (usd === undefined) return undefined;
  const micros = usdToMicros(usd);
  if (micros === 0n && usd > 0) throw invalid('price_per_call_usd', 'price_per_call_usd must be 0 or at least 0.000001 (one micro-dollar).');
  return micros;
}

const sealedColumns = (ports: McpPorts, serverId: string, headers: Record<string, string> | null) =>
  headers && Object.keys(headers).length > 0
    ? { headersSealed: ports.secretBox.seal(JSON.stringify(headers), serverId), headerNames: Object.keys(headers).sort() }
    : { headersSealed: null, headerNames: [] };

/** What the audit log keeps of a server: never a header value. */
const auditView = (s: McpServer) => ({
  name: s.name,
  url: s.url,
  header_names: s.headerNames,
  tools_allowed: stringList(s.toolsAllowed),
  price_per_call_usd: microsToUsd(s.priceMicros),
});

export interface NewMcpServer extends Checked {
  name: string;
  url: string;
  headers: Record<string, string> | null;
  toolsAllowed: string[] | null;
  priceMicros: bigint;
}

/** createMcpServer's validation (the input, the url, the headers, the project, a free name), writing nothing. */
export async function checkCreateMcpServer(ports: McpPorts, ctx: Ctx, raw: unknown): Promise<NewMcpServer> {
  const input = parseInput(CreateMcpServer, raw);
  checkToolNames(input.tools_allowed);
  const headers = openHeaders(ports, input.headers);
  const price = priceMicros(input.price_per_call_usd) ?? 0n;
  const projectId = await requireProjectId(ctx, input.project_id);
  const url = await vetUrl(ports, input.url);
  if (await store.nameTaken(ctx.db, projectId, input.name)) throw nameConflict();
  const toolsAllowed = input.tools_allowed ? [...new Set(input.tools_allowed)] : null;
  return { projectId, name: input.name, url, headers, toolsAllowed, priceMicros: price };
}

/** createMcpServer's change, as checkCreateMcpServer validated it; the headers sealed bound to the new id. */
export async function applyCreateMcpServer(ports: McpPorts, ctx: Ctx, checked: NewMcpServer, transact = ownTransaction(ctx)): Promise<McpServer> {
  const now = ctx.now();
  const id = newId('mcs', now.getTime());
  try {
    return await transact(async (tx) => {
      const server = await store.insertServer(tx, {
        id,
        projectId: checked.projectId,
        name: checked.name,
        url: checked.url,
        ...sealedColumns(ports, id, checked.headers),
        toolsAllowed: checked.toolsAllowed ?? undefined,
        priceMicros: checked.priceMicros,
        createdAt: now,
        updatedAt: now,
      });
      await recordAudit(tx, ctx, 'mcp_server.create', { projectId: checked.projectId, targetId: id, data: auditView(server) });
      return server;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw nameConflict();
    throw err;
  }
}

/** Audits mcp_server.create. Header values are sealed at rest (AES-256-GCM, bound to the server id) and never returned. */
export async function createMcpServer(ports: McpPorts, ctx: Ctx, raw: unknown): Promise<McpServer> {
  return applyCreateMcpServer(ports, ctx, await checkCreateMcpServer(ports, ctx, raw));
}

export async function listMcpServers(ctx: Ctx, raw: unknown): Promise<Page<McpServer>> {
  const query = parseInput(ListMcpServersQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  return paginate(query, {
    cursorField: 'id',
    fetch: (args) => store.listServers(ctx.db, projectId, args),
    exists: (id) => store.serverExists(ctx.db, projectId, id),
  });
}

/** Another project's server looks absent (404), never forbidden. */
export async function getMcpServer(ctx: Ctx, serverId: string): Promise<McpServer> {
  const projectId = await visibleProjectId(ctx, null);
  const server = await store.findInProject(ctx.db, projectId, serverId);
  if (!server) throw serverNotFound();
  addressed(ctx, server.projectId);
  return server;
}

/** The fields given replace the stored ones (headers: all of them). Audits mcp_server.update with the fields changed. */
export async function updateMcpServer(ports: McpPorts, ctx: Ctx, serverId: string, raw: unknown): Promise<McpServer> {
  const input = parseInput(UpdateMcpServer, sealHeaderValues(ports, raw ?? {}));
  checkToolNames(input.tools_allowed);
  const headers = input.headers === undefined ? undefined : openHeaders(ports, input.headers);
  const price = priceMicros(input.price_per_call_usd);
  const found = await getMcpServer(ctx, serverId);
  const url = input.url === undefined ? undefined : await vetUrl(ports, input.url);
  if (input.name !== undefined && (await store.nameTaken(ctx.db, found.projectId, input.name, found.id))) throw nameConflict();
  const data: Prisma.McpServerUncheckedUpdateInput = {
    ...(input.name !== undefined ? { name: input.name } : {}),
    ...(url !== undefined ? { url } : {}),
    ...(headers !== undefined ? sealedColumns(ports, found.id, headers) : {}),
    ...(input.tools_allowed !== undefined ? { toolsAllowed: input.tools_allowed === null ? Prisma.DbNull : [...new Set(input.tools_allowed)] } : {}),
    ...(price !== undefined ? { priceMicros: price } : {}),
    updatedAt: ctx.now(),
  };
  try {
    return await ctx.db.$transaction(async (tx) => {
      const server = await store.updateServer(tx, found.id, data);
      const changed = Object.keys(input).filter((k) => k !== 'project_id');
      await recordAudit(tx, ctx, 'mcp_server.update', { projectId: found.projectId, targetId: found.id, data: { changed, ...auditView(server) } });
      return server;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw nameConflict();
    throw err;
  }
}

/** Deletes the server (its calls stay in the audit log). Audits mcp_server.delete. */
export async function deleteMcpServer(ctx: Ctx, serverId: string): Promise<McpServer> {
  const found = await getMcpServer(ctx, serverId);
  await ctx.db.$transaction(async (tx) => {
    if (!(await store.deleteServer(tx, found.projectId, found.id))) throw serverNotFound();
    await recordAudit(tx, ctx, 'mcp_server.delete', { projectId: found.projectId, targetId: found.id, data: auditView(found) });
  });
  return found;
}

/** One tool call as the audit log recorded it (the console's recent calls). */
export interface McpCall {
  id: string;
  createdAt: Date;
  tool: string;
  keyId: string | null;
  durationMs: number;
  outcome: string;
  status: number;
  code: string | null;
}

/** The server's last tool calls, newest first, from the audit log (mcp.tool.call). */
export async function recentMcpCalls(ctx: Ctx, serverId: string, limit = 20): Promise<McpCall[]> {
  const server = await getMcpServer(ctx, serverId);
  const rows = await store.recentCalls(ctx.db, server.projectId, server.id, Math.min(Math.max(limit, 1), 100));
  return rows.map((r) => {
    const d = (r.data ?? {}) as Record<string, unknown>;
    return {
      id: r.id,
      createdAt: r.createdAt,
      tool: String(d.tool ?? ''),
      keyId: r.actorKeyId,
      durationMs: Number(d.duration_ms ?? 0),
      outcome: String(d.outcome ?? ''),
      status: Number(d.status ?? 0),
      code: typeof d.code === 'string' ? d.code : null,
    };
  });
}

/** A tool of a server as the console shows it: whether the server's tools_allowed exposes it. */
export interface McpToolInfo {
  name: string;
  description: string | null;
  exposed: boolean;
}

/** The server's tools as it lists them now (the console's view, not narrowed by a key); 400 naming url when unreachable. */
export async function listServerTools(ports: McpPorts, ctx: Ctx, serverId: string): Promise<McpToolInfo[]> {
  const server = await getMcpServer(ctx, serverId);
  const proxy = await import('./proxy.ts');
  const headers = server.headersSealed ? (JSON.parse(ports.secretBox.open(server.headersSealed, server.id)) as Record<string, string>) : {};
  const allowed = { name: server.name, toolsAllowed: stringList(server.toolsAllowed) };
  try {
    const tools = await proxy.listUpstreamTools({ url: new URL(server.url), headers, fetch: ports.fetch, timeoutMs: ports.upstreamTimeoutMs });
    return tools.map((t) => ({ name: t.name, description: t.description ?? null, exposed: toolAllowed(allowed, null, t.name) }));
  } catch (err) {
    // No code of the spec's table says "the upstream failed": 400 naming url, the field to fix.
    throw invalid('url', `The MCP server could not list its tools: ${(err as Error).message}`);
  }
}

/** A Streamable HTTP request as the edge hands it over (a Web-standard Request) and its parsed JSON-RPC message. */
export interface McpHttpRequest {
  request: Request;
  message: unknown;
}

/** How a tool call ended, as the audit log and the event say it. */
type Outcome = 'ok' | 'tool_error' | 'refused' | 'budget_exceeded' | 'pii_redaction_failed' | 'upstream_error';

/**
 * /v1/mcp/{server_id} (CONTRACT §20): proxies initialize, tools/list and tools/call to the server. The key's `mcp_tools`
 * and the server's `tools_allowed` hide tools from tools/list and refuse calls to them (a JSON-RPC error, audited 403
 * insufficient_scope). Every call is audited (mcp.tool.call), charged the server's price against the key's and the
 * project's budgets (an exhausted budget refuses a priced call), redacted when the project redacts PII (arguments on
 * the way in, results on the way out), and a call that reached the server emits mcp.tool.called.
 */
export async function serveMcp(ports: McpPorts, ctx: Ctx, serverId: string, http: McpHttpRequest): Promise<Response> {
  const server = await getMcpServer(ctx, serverId);
  const projectId = server.projectId;
  const grants = ctx.caller.kind === 'key' ? await store.toolGrantsOf(ctx.db, ctx.caller.keyId) : null;
  const allowed = { name: server.name, toolsAllowed: stringList(server.toolsAllowed) };
  const headers = server.headersSealed ? (JSON.parse(ports.secretBox.open(server.headersSealed, server.id)) as Record<string, string>) : {};
  const proxy = await import('./proxy.ts');

  const record = async (tool: string, startedAt: number, outcome: Outcome, status: number, code: string | null, charged: bigint) => {
    const now = ctx.now();
    const durationMs = Math.round(performance.now() - startedAt);
    const keyId = ctx.caller.keyId;
    const data = { server_id: server.id, server: server.name, tool, key_id: keyId, duration_ms: durationMs, outcome, status, code, price_usd: microsToUsd(charged) };
    await ctx.db.$transaction(async (tx) => {
      await recordAudit(tx, ctx, 'mcp.tool.call', { projectId, targetId: server.id, data });
      if (charged > 0n) {
        await applySpend(tx, [{ projectId, keyId: ctx.caller.kind === 'key' ? keyId : null, period: periodOf(now), micros: charged }], now);
      }
      if (outcome === 'ok' || outcome === 'tool_error' || outcome === 'upstream_error') {
        await enqueueEvent(tx, now, projectId, 'mcp.tool.called', { ...data, request_id: ctx.requestId });
      }
    });
  };

  const policy = {
    visible: (tool: string) => toolAllowed(allowed, grants, tool),
    call: async (tool: string, args: Record<string, unknown> | undefined, forward: (a: Record<string, unknown> | undefined) => Promise<import('@modelcontextprotocol/sdk/types.js').CallToolResult>) => {
      const startedAt = performance.now();
      if (!toolAllowed(allowed, grants, tool)) {
        await record(tool, startedAt, 'refused', 403, 'insufficient_scope', 0n);
        throw new proxy.McpRefusal(-32602, `Tool ${tool} is not allowed for this key on MCP server ${server.name} (mcp_tools, tools_allowed).`, {
          code: 'insufficient_scope',
          request_id: ctx.requestId,
        });
      }
      const project = await ports.projects.get(projectId);
      if (server.priceMicros > 0n) {
        try {
          await assertWithinBudget(ports.budgets, ctx, project?.budgetMicros ?? null);
        } catch (err) {
          if (!(err instanceof SvcError) || err.code !== 'budget_exceeded') throw err;
          await record(tool, startedAt, 'budget_exceeded', 429, 'budget_exceeded', 0n);
          throw new proxy.McpRefusal(-32000, err.message, { code: 'budget_exceeded', request_id: ctx.requestId });
        }
      }
      let redaction: PiiRedaction | null = null;
      let sent = args;
      try {
        if (project?.privacy?.piiRedact) {
          await loadPiiParsers();
          redaction = new PiiRedaction({ timeoutMs: ports.piiTimeoutMs, now: ports.monotonicNow ?? (() => performance.now()) });
          if (args !== undefined) sent = JSON.parse(redaction.redactJson(JSON.stringify(args))) as Record<string, unknown>;
        }
      } catch (err) {
        if (!(err instanceof SvcError) || err.code !== 'pii_redaction_failed') throw err;
        await record(tool, startedAt, 'pii_redaction_failed', 422, 'pii_redaction_failed', 0n);
        throw new proxy.McpRefusal(-32000, err.message, { code: 'pii_redaction_failed', request_id: ctx.requestId });
      }
      let result;
      try {
        result = await forward(sent);
      } catch (err) {
        if (err instanceof proxy.UpstreamFailure) await record(tool, startedAt, 'upstream_error', 502, null, 0n);
        throw err;
      }
      if (redaction) result = redactResult(redaction, result);
      // The server did the work: a tool's own error (isError) is charged like a success.
      const charged = server.priceMicros;
      if (charged > 0n) await chargeSpend(ports.budgets, ctx, projectId, charged, project?.budgetMicros ?? null).added;
      await record(tool, startedAt, result.isError ? 'tool_error' : 'ok', 200, null, charged);
      return result;
    },
  };

  return proxy.serveMcpRequest(
    http.request,
    http.message,
    { url: new URL(server.url), headers, fetch: ports.fetch, timeoutMs: ports.upstreamTimeoutMs },
    policy,
  );
}

/** The result's text parts and structured content redacted, as inference redacts an answer. */
function redactResult<R extends { content?: unknown; structuredContent?: unknown }>(redaction: PiiRedaction, result: R): R {
  const content = Array.isArray(result.content)
    ? result.content.map((part: { type?: string; text?: unknown }) =>
        part?.type === 'text' && typeof part.text === 'string' ? { ...part, text: redaction.redact(part.text) } : part,
      )
    : result.content;
  const structured =
    result.structuredContent !== undefined ? JSON.parse(redaction.redactJson(JSON.stringify(result.structuredContent))) : undefined;
  return { ...result, content, ...(structured !== undefined ? { structuredContent: structured } : {}) };
}
