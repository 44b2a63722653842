import { useState } from 'preact/hooks';
import { NewVerticalObject, VERTICAL_CREATES } from './verticals-create.ts';
import type { Viewer } from '../viewer.ts';
import { gql } from '../api.ts';
import { Card, ErrorBox, Pager, Status, fmtTime, html, usePager, useQuery } from '../ui.ts';

interface Incident {
  id: string;
  title: string;
  severity: string;
  service: string | null;
  status: string;
  resolution: string | null;
  openedAt: number;
  closedAt: number | null;
}
interface Entry {
  id: string;
  kind: string;
  message: string;
  actor: string;
  at: number;
}
type IncidentPage = { opsIncidents: { edges: { node: Incident }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } };
type IncidentView = { opsIncident: Incident & { timeline: { edges: { node: Entry }[] } } };

const FIELDS = 'id title severity service status resolution openedAt closedAt';
const LIST = `query Incidents($projectId: ID, $after: String) {
  opsIncidents(projectId: $projectId, first: 20, after: $after) { edges { node { ${FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const VIEW = `query Incident($id: ID!) { opsIncident(id: $id) { ${FIELDS} timeline(first: 100) { edges { node { id kind message actor at } } } } }`;
const NOTE = `mutation Note($id: ID!, $message: String!) { addTimelineEntry(incidentId: $id, message: $message) { id } }`;
const CLOSE = `mutation Close($id: ID!, $resolution: String) { closeIncident(id: $id, resolution: $resolution) { id } }`;

/** One incident and its timeline (oldest first here, as one reads a story), with a note and close form. */
function IncidentView({ id, onBack }: { id: string; onBack: () => void }) {
  const [refresh, setRefresh] = useState(0);
  const [text, setText] = useState('');
  const [error, setError] = useState<unknown>(null);
  const view = useQuery(() => gql<IncidentView>(VIEW, { id }), [id, refresh]);
  const i = view.data?.opsIncident;
  const act = async (query: string, vars: Record<string, unknown>) => {
    try {
      await gql(query, vars);
      setText('');
      setError(null);
    } catch (err) {
      setError(err);
    }
    setRefresh(refresh + 1);
  };
  const entries = [...(i?.timeline.edges.map((e) => e.node) ?? [])].reverse();
  return html`<${Card} title=${i ? `Incident ${i.title}` : 'Incident'}>
    <p><button type="button" onClick=${onBack}>← All incidents</button></p>
    <${ErrorBox} error=${view.error ?? error} />
    ${i
      ? html`<dl class="facts" aria-label="Incident">
          <dt>Id</dt><dd><code>${i.id}</code></dd><dt>Status</dt><dd><${Status} value=${i.status} /> ${i.severity}</dd>
          <dt>Service</dt><dd>${i.service ?? '—'}</dd><dt>Opened</dt><dd>${fmtTime(i.openedAt)}</dd>
          ${i.closedAt ? html`<dt>Closed</dt><dd>${fmtTime(i.closedAt)}${i.resolution ? html` · ${i.resolution}` : null}</dd>` : null}
        </dl>
        <h3>Timeline</h3>
        <ol class="timeline" aria-label="Timeline">${entries.map((e) => html`<li data-entry-id=${e.id} data-kind=${e.kind}>
          <time>${fmtTime(e.at)}</time> <strong>${e.kind}</strong> ${e.message} <span class="muted">(${e.actor})</span></li>`)}</ol>
        <form class="inline" onSubmit=${(e: Event) => (e.preventDefault(), text.trim() && act(NOTE, { id, message: text.trim() }))}>
          <label>Note <input name="note" maxlength="4000" value=${text} onInput=${(e: Event) => setText((e.target as HTMLInputElement).value)} /></label>
          <button type="submit">Add to timeline</button>
          ${i.status === 'open' ? html`<button type="button" onClick=${() => act(CLOSE, { id, resolution: text.trim() || null })}>Close incident</button>` : null}
        </form>`
      : null}
  <//>`;
}

/** The Ops vertical (CONTRACT §16): incidents newest first, and one incident's timeline. */
export function OpsScreen({ projectId, viewer }: { projectId: string; viewer: Viewer }) {
  const pager = usePager();
  const [open, setOpen] = useState<string | null>(null);
  const list = useQuery(() => gql<IncidentPage>(LIST, { projectId, after: pager.after }), [projectId, pager.after]);
  if (open) return html`<${IncidentView} id=${open} onBack=${() => setOpen(null)} />`;
  const rows = list.data?.opsIncidents.edges.map((e) => e.node) ?? [];
  return html`<${Card} title="Ops incidents">
    <${NewVerticalObject} spec=${VERTICAL_CREATES.ops} projectId=${projectId} scopes=${viewer.scopes} onCreated=${list.reload} />
    <${ErrorBox} error=${list.error} />
    ${list.data && rows.length === 0 ? html`<p class="empty">No incidents.</p>` : null}
    ${rows.length
      ? html`<table aria-label="Incidents"><thead><tr><th>Title</th><th>Severity</th><th>Status</th><th>Service</th><th>Opened</th></tr></thead>
          <tbody>${rows.map((i) => html`<tr data-incident-id=${i.id}>
            <td><a href="#" onClick=${(e: Event) => (e.preventDefault(), setOpen(i.id))}>${i.title}</a></td>
            <td>${i.severity}</td><td><${Status} value=${i.status} /></td><td>${i.service ?? '—'}</td><td>${fmtTime(i.openedAt)}</td>
          </tr>`)}</tbody></table>`
      : null}
    <${Pager} pager=${pager} hasNext=${list.data?.opsIncidents.pageInfo.hasNextPage ?? false} endCursor=${list.data?.opsIncidents.pageInfo.endCursor ?? null} />
  <//>`;
}
