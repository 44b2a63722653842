import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import type { Viewer } from '../viewer.ts';
import { Card, ErrorBox, Pager, Status, fmtTime, html, usePager, useQuery } from '../ui.ts';

interface Approval {
  id: string;
  action: string;
  resource: string;
  params: Record<string, string>;
  request: Record<string, unknown>;
  before: Record<string, unknown> | null;
  requestedBy: string;
  status: string;
  decidedBy: string | null;
  decidedAt: number | null;
  reason: string | null;
  error: { code: string; message: string; param: string | null } | null;
  resultId: string | null;
  expiresAt: number;
  createdAt: number;
  secret: string | null;
}

type Page = { approvals: { edges: { node: Approval }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } };

const FIELDS = 'id action resource params request before requestedBy status decidedBy decidedAt reason error resultId expiresAt createdAt';
const LIST = `query Approvals($projectId: ID, $status: String, $after: String) {
  approvals(projectId: $projectId, status: $status, first: 20, after: $after) { edges { node { ${FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const APPROVE = `mutation Approve($id: ID!) { approveApproval(id: $id) { ${FIELDS} secret } }`;
const REJECT = `mutation Reject($id: ID!, $reason: String) { rejectApproval(id: $id, reason: $reason) { ${FIELDS} } }`;

const show = (v: unknown) => (v === undefined ? '—' : JSON.stringify(v));

/** The change as a before/after table: each field of the request (and of the resource before it), changed ones marked. */
export function ChangeDiff({ approval }: { approval: Pick<Approval, 'before' | 'request' | 'params'> }) {
  const before = approval.before ?? {};
  const after = approval.request ?? {};
  const fields = [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((f) => f !== 'project_id');
  const ids = Object.entries(approval.params ?? {});
  return html`<div class="diff">
    ${ids.length ? html`<div class="muted">${ids.map(([k, v]) => html`<span>${k} <code>${v}</code> </span>`)}</div>` : null}
    ${fields.length === 0
      ? html`<p class="muted">No body: the action itself is the change.</p>`
      : html`<table aria-label="Change">
          <thead><tr><th>Field</th><th>Before</th><th>After</th></tr></thead>
          <tbody>${fields.map((f) => {
            const changed = f in after && show(before[f]) !== show(after[f]);
            return html`<tr class=${changed ? 'changed' : ''} data-field=${f}>
              <td><code>${f}</code></td><td class="mono before">${approval.before === null ? '(new)' : show(before[f])}</td>
              <td class="mono after">${f in after ? show(after[f]) : '(unchanged)'}</td>
            </tr>`;
          })}</tbody>
        </table>`}
  </div>`;
}

function ApprovalItem({ approval, viewer, onDecided }: { approval: Approval; viewer: Viewer; onDecided: (a: Approval) => void }) {
  const [reason, setReason] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const own = approval.requestedBy === viewer.keyId;
  const decide = async (verb: 'approve' | 'reject') => {
    setBusy(true);
    try {
      const r =
        verb === 'approve'
          ? (await gql<{ approveApproval: Approval }>(APPROVE, { id: approval.id })).approveApproval
          : (await gql<{ rejectApproval: Approval }>(REJECT, { id: approval.id, reason: reason.trim() || null })).rejectApproval;
      setError(null);
      onDecided(r);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<article class="approval" data-approval-id=${approval.id} aria-label=${`Approval ${approval.id}`}>
    <header><strong><code>${approval.action}</code></strong> <${Status} value=${approval.status} />
      <span class="muted"> ${approval.id} · requested by <code>${approval.requestedBy}</code> at ${fmtTime(approval.createdAt)}
        ${approval.status === 'pending' ? html` · expires ${fmtTime(approval.expiresAt)}` : null}</span></header>
    <${ChangeDiff} approval=${approval} />
    ${approval.status === 'pending'
      ? own
        ? html`<p class="muted">You requested this change: another key must approve or reject it.</p>`
        : html`<form class="inline" onSubmit=${(e: Event) => e.preventDefault()}>
            <label>Reason (optional, for a rejection) <input name="reason" maxlength="1000" value=${reason}
              onInput=${(e: Event) => setReason((e.target as HTMLInputElement).value)} /></label>
            <button class="primary" type="button" disabled=${busy} onClick=${() => decide('approve')}>Approve</button>
            <button type="button" disabled=${busy} onClick=${() => decide('reject')}>Reject</button>
          </form>`
      : html`<p class="muted">Decided by <code>${approval.decidedBy ?? 'the expiry'}</code> at ${fmtTime(approval.decidedAt)}
          ${approval.reason ? html` · reason: “${approval.reason}”` : null}
          ${approval.resultId ? html` · result <code>${approval.resultId}</code>` : null}</p>`}
    ${approval.error ? html`<div class="error" role="alert"><strong>Failed: ${approval.error.message}</strong>
      <div>code <code>${approval.error.code}</code>${approval.error.param ? html`, param <code>${approval.error.param}</code>` : null}</div></div>` : null}
    ${approval.secret ? html`<div class="notice" role="status">The change issued a secret, shown once: <code class="secret">${approval.secret}</code></div>` : null}
    <${ErrorBox} error=${error} />
  </article>`;
}

/** Dual control (CONTRACT §15): pending changes first, each as a before/after diff, approved or rejected by another key. */
export function ApprovalsScreen({ viewer, projectId }: { viewer: Viewer; projectId: string }) {
  const pager = usePager();
  const [decided, setDecided] = useState<Record<string, Approval>>({});
  const pending = useQuery(() => gql<Page>(LIST, { projectId, status: 'pending', after: null }), [projectId, decided]);
  const history = useQuery(() => gql<Page>(LIST, { projectId, status: null, after: pager.after }), [projectId, pager.after, decided]);
  const onDecided = (a: Approval) => setDecided({ ...decided, [a.id]: a });
  const justDecided = Object.values(decided);
  const others = (history.data?.approvals.edges.map((e) => e.node) ?? []).filter((a) => a.status !== 'pending' && !decided[a.id]);
  const open = pending.data?.approvals.edges.map((e) => e.node) ?? [];
  return html`
    <${Card} title="Pending approvals">
      <p class="muted">Changes to the resources this project keeps under dual control wait here for a second key, for 24 hours.</p>
      <${ErrorBox} error=${pending.error} />
      ${justDecided.map((a) => html`<${ApprovalItem} key=${a.id} approval=${a} viewer=${viewer} onDecided=${onDecided} />`)}
      ${open.map((a) => html`<${ApprovalItem} key=${a.id} approval=${a} viewer=${viewer} onDecided=${onDecided} />`)}
      ${pending.data && open.length === 0 ? html`<p class="empty">Nothing is waiting for approval.</p>` : null}
    <//>
    <${Card} title="Decided">
      <${ErrorBox} error=${history.error} />
      ${others.map((a) => html`<${ApprovalItem} key=${a.id} approval=${a} viewer=${viewer} onDecided=${onDecided} />`)}
      ${history.data && others.length === 0 ? html`<p class="empty">No decided approvals on this page.</p>` : null}
      <${Pager} pager=${pager} hasNext=${history.data?.approvals.pageInfo.hasNextPage ?? false} endCursor=${history.data?.approvals.pageInfo.endCursor ?? null} />
    <//>`;
}
