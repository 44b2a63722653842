import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { SidePanel } from '../panel.ts';
import type { ScreenProps } from '../viewer.ts';
import { Card, ErrorBox, Pager, Status, fmtTime, html, usePager, useQuery } from '../ui.ts';

interface McpServer {
  id: string;
  name: string;
  url: string;
  endpoint: string;
  headerNames: string[];
  toolsAllowed: string[] | null;
  pricePerCallUsd: number;
  createdAt: number;
}
interface McpTool {
  name: string;
  description: string | null;
  exposed: boolean;
}
interface McpCall {
  id: string;
  createdAt: number;
  tool: string;
  keyId: string | null;
  durationMs: number;
  outcome: string;
  status: number;
  code: string | null;
}

const LIST = `query McpServers($projectId: ID, $after: String) {
  mcpServers(projectId: $projectId, first: 20, after: $after) {
    edges { node { id name url endpoint headerNames toolsAllowed pricePerCallUsd createdAt } } pageInfo { hasNextPage endCursor } }
}`;
const DETAIL = `query McpServer($id: ID!) {
  mcpServer(id: $id) { id recentCalls(limit: 20) { id createdAt tool keyId durationMs outcome status code } }
}`;
const TOOLS = `query McpServerTools($id: ID!) { mcpServer(id: $id) { id tools { name description exposed } } }`;
const CREATE = `mutation CreateMcpServer($input: CreateMcpServerInput!, $headers: [McpHeaderInput!]) { createMcpServer(input: $input, headers: $headers) { id } }`;
const DELETE = `mutation DeleteMcpServer($id: ID!) { deleteMcpServer(id: $id) { id deleted } }`;

/** The server's tools (asked of the server when opened) and its last calls through the gateway (the audit log). */
function ServerDetail({ serverId }: { serverId: string }) {
  const calls = useQuery(() => gql<{ mcpServer: { recentCalls: McpCall[] } }>(DETAIL, { id: serverId }), [serverId]);
  const tools = useQuery(() => gql<{ mcpServer: { tools: McpTool[] } }>(TOOLS, { id: serverId }), [serverId]);
  return html`<${Card} title=${`Tools of ${serverId}`}>
      <${ErrorBox} error=${tools.error} />
      <table>
        <thead><tr><th>Tool</th><th>Description</th><th>Exposed</th></tr></thead>
        <tbody>${tools.data?.mcpServer.tools.map((t) => html`<tr data-tool=${t.name}><td><code>${t.name}</code></td><td>${t.description ?? ''}</td>
          <td><${Status} value=${t.exposed ? 'active' : 'disabled'} /></td></tr>`)}</tbody>
      </table>
    <//>
    <${Card} title="Recent calls">
      <${ErrorBox} error=${calls.error} />
      <table>
        <thead><tr><th>When</th><th>Tool</th><th>Key</th><th>Outcome</th><th>Status</th><th>Duration</th></tr></thead>
        <tbody>${calls.data?.mcpServer.recentCalls.map((c) => html`<tr data-call-id=${c.id}>
          <td>${fmtTime(c.createdAt)}</td><td><code>${c.tool}</code></td><td class="mono">${c.keyId ?? ''}</td>
          <td>${c.outcome}${c.code ? html` <code>${c.code}</code>` : null}</td><td>${c.status}</td><td>${c.durationMs} ms</td></tr>`)}</tbody>
      </table>
    <//>`;
}

/** MCP servers of the project (CONTRACT §20): register, delete, see their tools and recent calls. */
export function McpScreen({ projectId }: Pick<ScreenProps, 'projectId'>) {
  const pager = usePager();
  const [form, setForm] = useState({ name: '', url: '', headerName: '', headerValue: '', tools: '', price: '0' });
  const [error, setError] = useState<unknown>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const q = useQuery(
    () => gql<{ mcpServers: { edges: { node: McpServer }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(LIST, { projectId, after: pager.after }),
    [projectId, pager.after],
  );
  const set = (field: keyof typeof form) => (e: Event) => setForm({ ...form, [field]: (e.target as HTMLInputElement).value });
  const create = async (e: Event) => {
    e.preventDefault();
    const tools = form.tools.split(',').map((t) => t.trim()).filter(Boolean);
    try {
      await gql(CREATE, {
        input: { projectId, name: form.name, url: form.url, toolsAllowed: tools.length > 0 ? tools : null, pricePerCallUsd: Number(form.price || '0') },
        headers: form.headerName ? [{ name: form.headerName, value: form.headerValue }] : null,
      });
      setForm({ name: '', url: '', headerName: '', headerValue: '', tools: '', price: '0' });
      setCreating(false);
      setError(null);
      q.reload();
    } catch (err) {
      setError(err);
    }
  };
  const remove = async (id: string) => {
    try {
      await gql(DELETE, { id });
      if (open === id) setOpen(null);
      q.reload();
    } catch (err) {
      setError(err);
    }
  };
  return html`
    <section class="card" aria-label="MCP servers">
      <div class="card-head"><h2>MCP servers</h2><button type="button" class="primary" onClick=${() => setCreating(true)}>Register a server</button></div>
      <${ErrorBox} error=${q.error} />
      <table>
        <thead><tr><th>Server</th><th>Name</th><th>URL</th><th>Headers</th><th>Tools allowed</th><th>Price/call</th><th>Created</th><th></th></tr></thead>
        <tbody>${q.data?.mcpServers.edges.map(({ node: s }) => html`<tr data-server-id=${s.id}>
          <td class="mono">${s.id}<div class="muted">${s.endpoint}</div></td><td>${s.name}</td><td class="mono">${s.url}</td>
          <td>${s.headerNames.join(', ')}</td><td>${s.toolsAllowed ? s.toolsAllowed.join(', ') : 'all'}</td>
          <td>$${s.pricePerCallUsd}</td><td>${fmtTime(s.createdAt)}</td>
          <td><div class="row-actions"><button type="button" onClick=${() => setOpen(open === s.id ? null : s.id)} aria-expanded=${open === s.id}>Tools and calls</button>
            <button type="button" class="danger" onClick=${() => remove(s.id)}>Delete</button></div></td>
        </tr>`)}</tbody>
      </table>
      ${q.data && q.data.mcpServers.edges.length === 0 ? html`<p class="empty">No MCP servers yet.</p>` : null}
      <${Pager} pager=${pager} hasNext=${q.data?.mcpServers.pageInfo.hasNextPage ?? false} endCursor=${q.data?.mcpServers.pageInfo.endCursor ?? null} />
    </section>
    <${SidePanel} title="Register an MCP server" open=${creating} onClose=${() => setCreating(false)}>
      <form onSubmit=${create} aria-label="Register an MCP server">
        <label>Name <input name="name" required value=${form.name} placeholder="files" onInput=${set('name')} /></label>
        <label>HTTPS URL <input name="url" type="url" required value=${form.url} placeholder="https://mcp.example.com/mcp" onInput=${set('url')} /></label>
        <label>Header name <input name="headerName" value=${form.headerName} placeholder="Authorization" onInput=${set('headerName')} /></label>
        <label>Header value (sealed, never shown again) <input name="headerValue" type="password" value=${form.headerValue} onInput=${set('headerValue')} /></label>
        <label>Tools allowed (comma-separated; empty: all) <input name="tools" value=${form.tools} onInput=${set('tools')} /></label>
        <label>Price per call (USD) <input name="price" type="number" min="0" step="0.000001" value=${form.price} onInput=${set('price')} /></label>
        <p><button class="primary" type="submit">Register server</button></p>
        <${ErrorBox} error=${error} />
      </form>
    <//>
    ${open ? html`<${ServerDetail} key=${open} serverId=${open} />` : null}`;
}
