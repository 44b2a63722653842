import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { Card, ErrorBox, Pager, fmtTime, html, usePager, useQuery } from '../ui.ts';

interface AuditEvent {
  id: string;
  action: string;
  actorKeyId: string | null;
  targetId: string | null;
  requestId: string | null;
  ip: string | null;
  createdAt: number;
  data: unknown;
}

const LIST = `query Audit($projectId: ID, $action: String, $after: String) {
  auditEvents(projectId: $projectId, action: $action, first: 50, after: $after) {
    edges { node { id action actorKeyId targetId requestId ip createdAt data } } pageInfo { hasNextPage endCursor }
  }
}`;

// The gateway's one table of audit actions (domain/audit/actions.ts), so the filter never misses one.
const ACTIONS = `query AuditActions { auditActions }`;

export function AuditScreen({ projectId }: { projectId: string }) {
  const pager = usePager();
  const [action, setAction] = useState('');
  const actions = useQuery(() => gql<{ auditActions: string[] }>(ACTIONS), []);
  const q = useQuery(
    () => gql<{ auditEvents: { edges: { node: AuditEvent }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(LIST, {
      projectId,
      action: action || null,
      after: pager.after,
    }),
    [projectId, action, pager.after],
  );
  return html`<${Card} title="Audit log">
    <label>Action
      <select value=${action} disabled=${!actions.data} onChange=${(e: Event) => { setAction((e.target as HTMLSelectElement).value); pager.reset(); }}>
        <option value="">all actions</option>
        ${actions.data?.auditActions.map((a) => html`<option value=${a}>${a}</option>`)}
      </select>
    </label>
    <${ErrorBox} error=${actions.error ?? q.error} />
    <table>
      <thead><tr><th>Time</th><th>Action</th><th>Actor</th><th>Target</th><th>Request</th><th>Data</th></tr></thead>
      <tbody>${q.data?.auditEvents.edges.map(({ node: e }) => html`<tr>
        <td>${fmtTime(e.createdAt)}</td><td><code>${e.action}</code></td><td class="mono">${e.actorKeyId ?? 'system'}</td>
        <td class="mono">${e.targetId ?? '—'}</td><td class="mono">${e.requestId ?? '—'}</td>
        <td><details><summary>data</summary><pre class="mono">${JSON.stringify(e.data, null, 2)}</pre></details></td>
      </tr>`)}</tbody>
    </table>
    <${Pager} pager=${pager} hasNext=${q.data?.auditEvents.pageInfo.hasNextPage ?? false} endCursor=${q.data?.auditEvents.pageInfo.endCursor ?? null} />
  <//>`;
}
