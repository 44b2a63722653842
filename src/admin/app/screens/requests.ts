import { useEffect, useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { SidePanel } from '../panel.ts';
import type { ScreenProps, Viewer } from '../viewer.ts';
import { Copy, ErrorBox, Pager, Status, fmtTime, fmtUsd, html, usePager, useQuery } from '../ui.ts';
import { Hops, TIMING_FIELDS, Waterfall, type Step, type Timings } from './request-timeline.ts';

export interface UsageRow {
  requestId: string;
  keyId: string;
  model: string;
  route: string | null;
  region: string | null;
  cacheHit: boolean;
  status: string;
  errorCode: string | null;
  promptTokens: number;
  completionTokens: number;
  costUsd: number;
  latencyMs: number;
  createdAt: number;
  templateId: string | null;
  templateVersion: number | null;
  customer: string | null;
}

const ROW = 'requestId keyId customer model route region cacheHit status errorCode promptTokens completionTokens costUsd latencyMs createdAt templateId templateVersion';
const LOG = `query RequestLog($projectId: ID, $after: String, $model: String, $keyId: ID, $customer: String, $status: String, $cacheHit: Boolean, $route: String) {
  requestLog(projectId: $projectId, first: 25, after: $after, model: $model, keyId: $keyId, customer: $customer, status: $status, cacheHit: $cacheHit, route: $route) {
    edges { node { ${ROW} } } pageInfo { hasNextPage endCursor }
  }
}`;
const DETAIL = `query RequestDetail($requestId: ID!) {
  requestDetail(requestId: $requestId) { inferenceId contentRetained record { ${ROW} } ${TIMING_FIELDS} }
}`;
const CONTENT = `query RetainedContent($id: ID!) { inference(id: $id) { request content finishReason } }`;

/** How often the first page is read again while "Live" is on. */
export const LIVE_INTERVAL_MS = 4_000;

interface Filters {
  model: string;
  keyId: string;
  customer: string;
  route: string;
  status: '' | 'succeeded' | 'failed';
  cache: '' | 'hit' | 'miss';
}
const NO_FILTERS: Filters = { model: '', keyId: '', customer: '', route: '', status: '', cache: '' };

interface Detail {
  inferenceId: string | null;
  contentRetained: boolean;
  record: UsageRow;
  traceId: string | null;
  timings: Timings | null;
  timeline: Step[];
}

const fmtMs = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms} ms`);
const fmtCount = (n: number) => n.toLocaleString('en-US');
/** key_01m8hya46f0sws98z8wmqfe85j as key_…wmqfe85j in the table (the full id is its title, and in the details). */
const shortId = (id: string) => (id.length > 16 ? `${id.slice(0, id.indexOf('_') + 1)}…${id.slice(-8)}` : id);

function RetainedContent({ inferenceId }: { inferenceId: string }) {
  const q = useQuery(() => gql<{ inference: { request: { messages?: { role: string; content: unknown }[] }; content: string | null; finishReason: string | null } }>(CONTENT, { id: inferenceId }), [inferenceId]);
  if (q.error) return html`<${ErrorBox} error=${q.error} />`;
  if (!q.data) return html`<p class="muted">Loading the retained content…</p>`;
  const messages = q.data.inference.request?.messages ?? [];
  return html`<div class="retained" data-testid="retained-content">
    <h4>Request</h4>
    ${messages.map((m) => html`<div class="message"><span class="role">${m.role}</span><pre>${typeof m.content === 'string' ? m.content : JSON.stringify(m.content, null, 2)}</pre></div>`)}
    <h4>Answer${q.data.inference.finishReason ? html` <small class="muted">(${q.data.inference.finishReason})</small>` : null}</h4>
    <pre>${q.data.inference.content ?? '—'}</pre>
  </div>`;
}

function RequestDrawer({ requestId, viewer }: { requestId: string; viewer: Viewer }) {
  const q = useQuery(() => gql<{ requestDetail: Detail }>(DETAIL, { requestId }), [requestId]);
  if (q.error) return html`<${ErrorBox} error=${q.error} />`;
  if (!q.data) return html`<p class="muted">Loading…</p>`;
  const d = q.data.requestDetail;
  const r = d.record;
  const canRead = viewer.scopes.includes('inference:read');
  return html`<div data-testid="request-detail">
    <dl class="facts">
      <dt>Request id</dt><dd class="mono">${r.requestId}</dd>
      <dt>Trace id</dt><dd data-testid="trace-id">${d.traceId
        ? html`<span class="secret"><code>${d.traceId}</code><${Copy} text=${d.traceId} label="Copy trace id" /></span>`
        : html`<span class="muted">none: tracing did not export this request and the caller sent no <code>traceparent</code></span>`}</dd>
      <dt>Status</dt><dd><${Status} value=${r.status} />${r.errorCode ? html` <code>${r.errorCode}</code>` : null}</dd>
      <dt>Model</dt><dd>${r.model}</dd>
      <dt>Route</dt><dd>${r.route ?? '—'}${r.region ? ` (${r.region})` : ''}</dd>
      <dt>Key</dt><dd class="mono">${r.keyId}</dd>
      ${r.customer ? html`<dt>Customer</dt><dd>${r.customer}</dd>` : null}
      <dt>Latency</dt><dd>${fmtMs(r.latencyMs)}${d.timings ? html` <span class="muted">(${fmtMs(Math.round(d.timings.totalMs))} from the request's start)</span>` : null}</dd>
      <dt>Tokens</dt><dd>${fmtCount(r.promptTokens)} prompt + ${fmtCount(r.completionTokens)} completion</dd>
      <dt>Cost</dt><dd>${fmtUsd(r.costUsd)}</dd>
      <dt>Cache</dt><dd>${r.cacheHit ? 'hit' : 'miss'}</dd>
      ${r.templateId ? html`<dt>Template</dt><dd class="mono">${r.templateId} v${r.templateVersion}</dd>` : null}
      <dt>Created</dt><dd>${fmtTime(r.createdAt)}</dd>
    </dl>
    <h3>Timeline</h3>
    <${Waterfall} steps=${d.timeline} recorded=${d.timings !== null} />
    ${d.timings ? html`<h3>Provider hops</h3><${Hops} hops=${d.timings.hops} cacheHit=${r.cacheHit} />` : null}
    <h3>Content</h3>
    ${!d.inferenceId || !d.contentRetained
      ? html`<p class="muted">No content is retained for this request (zero retention, purged, or past its retention period).</p>`
      : !canRead
        ? html`<p class="muted">The content is retained as <code>${d.inferenceId}</code>; reading it needs the <code>inference:read</code> scope.</p>`
        : html`<${RetainedContent} inferenceId=${d.inferenceId} />`}
  </div>`;
}

export function RequestsScreen({ viewer, projectId }: ScreenProps) {
  const pager = usePager();
  const [draft, setDraft] = useState<Filters>(NO_FILTERS);
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  const [live, setLive] = useState(true);
  const [open, setOpen] = useState<string | null>(null);
  const vars = {
    projectId,
    after: pager.after,
    model: filters.model || null,
    keyId: filters.keyId || null,
    customer: filters.customer || null,
    route: filters.route || null,
    status: filters.status || null,
    cacheHit: filters.cache === '' ? null : filters.cache === 'hit',
  };
  const q = useQuery(
    () => gql<{ requestLog: { edges: { node: UsageRow }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(LOG, vars),
    [projectId, pager.after, JSON.stringify(filters)],
  );
  // Live: the newest page is read again every few seconds (older pages stay put while one reads them).
  useEffect(() => {
    if (!live || pager.page !== 1) return;
    const timer = setInterval(q.reload, LIVE_INTERVAL_MS);
    return () => clearInterval(timer);
  }, [live, pager.page, q.reload]);
  const rows = q.data?.requestLog.edges.map((e) => e.node) ?? [];
  const set = (k: keyof Filters) => (e: Event) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value });
  const apply = (e: Event) => {
    e.preventDefault();
    pager.reset();
    setFilters(draft);
  };
  return html`<section class="card" aria-label="Request log">
    <form class="toolbar" role="search" aria-label="Filter requests" onSubmit=${apply}>
      <label>Model <input name="model" value=${draft.model} onInput=${set('model')} placeholder="any" /></label>
      <label>Key <input name="keyId" value=${draft.keyId} onInput=${set('keyId')} placeholder="key_…" /></label>
      <label>Customer <input name="customer" value=${draft.customer} onInput=${set('customer')} placeholder="any" /></label>
      <label>Route <input name="route" value=${draft.route} onInput=${set('route')} placeholder="provider/model" /></label>
      <label>Status <select name="status" value=${draft.status} onChange=${set('status')}>
        <option value="">any</option><option value="succeeded">succeeded</option><option value="failed">failed</option></select></label>
      <label>Cache <select name="cache" value=${draft.cache} onChange=${set('cache')}>
        <option value="">any</option><option value="hit">hit</option><option value="miss">miss</option></select></label>
      <button type="submit" class="primary">Filter</button>
      <button type="button" onClick=${() => { setDraft(NO_FILTERS); setFilters(NO_FILTERS); pager.reset(); }}>Clear</button>
      <span class="grow"></span>
      <label class="inline-check"><input type="checkbox" checked=${live} onChange=${() => setLive(!live)} /> Live</label>
    </form>
    <${ErrorBox} error=${q.error} />
    <div class="table-scroll">
    <table class="requests">
      <thead><tr><th>Time</th><th>Model</th><th>Key</th><th>Customer</th><th>Status</th><th class="num">Latency</th><th class="num">Tokens</th><th class="num">Cost</th><th>Cache</th><th>Route</th><th><span class="sr-only">Details</span></th></tr></thead>
      <tbody>${rows.map((r) => html`<tr data-request-id=${r.requestId} class=${open === r.requestId ? 'selected' : ''}>
        <td>${fmtTime(r.createdAt)}</td>
        <td>${r.model}</td>
        <td class="mono" title=${r.keyId}>${shortId(r.keyId)}</td>
        <td>${r.customer ?? '—'}</td>
        <td><${Status} value=${r.status} />${r.errorCode ? html` <code>${r.errorCode}</code>` : null}</td>
        <td class="num">${fmtMs(r.latencyMs)}</td>
        <td class="num">${fmtCount(r.promptTokens + r.completionTokens)}</td>
        <td class="num">${fmtUsd(r.costUsd)}</td>
        <td>${r.cacheHit ? 'hit' : '—'}</td>
        <td class="mono">${r.route ?? '—'}</td>
        <td><button type="button" aria-label=${`Details of ${r.requestId}`} onClick=${() => setOpen(r.requestId)}>Details</button></td>
      </tr>`)}</tbody>
    </table>
    </div>
    ${q.data && rows.length === 0 ? html`<p class="empty">No requests${JSON.stringify(filters) === JSON.stringify(NO_FILTERS) ? ' yet: inferences show here as they finish' : ' match these filters'}.</p>` : null}
    <${Pager} pager=${pager} hasNext=${q.data?.requestLog.pageInfo.hasNextPage ?? false} endCursor=${q.data?.requestLog.pageInfo.endCursor ?? null} />
  </section>
  <${SidePanel} title=${open ? `Request ${open}` : 'Request'} open=${open !== null} onClose=${() => setOpen(null)} wide>
    ${open ? html`<${RequestDrawer} requestId=${open} viewer=${viewer} />` : null}
  <//>`;
}
