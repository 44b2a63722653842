import { useEffect, useState } from 'preact/hooks';
import { gql } from '../api.ts';
import type { Viewer } from '../viewer.ts';
import { Card, ErrorBox, Status, fmtTime, fmtUsd, html, useQuery } from '../ui.ts';

interface Batch {
  id: string;
  endpoint: string;
  status: string;
  inputFileId: string;
  outputFileId: string | null;
  errorFileId: string | null;
  requestCounts: { total: number; completed: number; failed: number };
  costUsd: number;
  metadata: Record<string, string> | null;
  errors: { data?: { code: string; message: string; line?: number }[] } | null;
  createdAt: number;
  inProgressAt: number | null;
  expiresAt: number;
  completedAt: number | null;
  cancelledAt: number | null;
  expiredAt: number | null;
  failedAt: number | null;
}

const FIELDS = 'id endpoint status inputFileId outputFileId errorFileId requestCounts { total completed failed } costUsd metadata errors createdAt inProgressAt expiresAt completedAt cancelledAt expiredAt failedAt';
const LIST = `query Batches($projectId: ID) { batches(projectId: $projectId, first: 50) { edges { node { ${FIELDS} } } } }`;
const ONE = `query Batch($id: ID!) { batch(id: $id) { ${FIELDS} } }`;
const CANCEL = `mutation CancelBatch($id: ID!) { cancelBatch(id: $id) { id status } }`;
const RUNNING = ['validating', 'in_progress', 'finalizing', 'cancelling'];

function Progress({ b }: { b: Batch }) {
  const c = b.requestCounts;
  const done = c.completed + c.failed;
  return html`<span class="progress" aria-label=${`Progress of ${b.id}`}>
    <progress max=${c.total} value=${done}></progress> ${done}/${c.total}${' '}
    · <span class="ok">${c.completed} completed</span> · ${c.failed} failed
  </span>`;
}

function Detail({ id, tick }: { id: string; tick: number }) {
  const q = useQuery(() => gql<{ batch: Batch | null }>(ONE, { id }), [id, tick]);
  if (!q.data) return html`<${ErrorBox} error=${q.error} />`;
  const b = q.data.batch;
  if (!b) return html`<p class="empty">No batch ${id}.</p>`;
  const when = (label: string, t: number | null) => (t ? html`<dt>${label}</dt><dd>${fmtTime(t)}</dd>` : null);
  return html`<div aria-label=${`Batch ${b.id}`}>
    <p><code>${b.id}</code> <${Status} value=${b.status} /> <${Progress} b=${b} /> · ${fmtUsd(b.costUsd)}</p>
    <dl>
      <dt>Endpoint</dt><dd><code>${b.endpoint}</code></dd>
      <dt>Input file</dt><dd><code>${b.inputFileId}</code></dd>
      <dt>Output file</dt><dd>${b.outputFileId ? html`<code>${b.outputFileId}</code>` : '—'}</dd>
      <dt>Error file</dt><dd>${b.errorFileId ? html`<code>${b.errorFileId}</code>` : '—'}</dd>
      ${when('Created', b.createdAt)} ${when('Started', b.inProgressAt)} ${when('Completed', b.completedAt)}
      ${when('Cancelled', b.cancelledAt)} ${when('Expired', b.expiredAt)} ${when('Failed', b.failedAt)}
      <dt>Expires</dt><dd>${fmtTime(b.expiresAt)}</dd>
      ${b.metadata ? html`<dt>Metadata</dt><dd class="mono">${JSON.stringify(b.metadata)}</dd>` : null}
    </dl>
    ${b.errors?.data?.length
      ? html`<table aria-label="Validation errors"><thead><tr><th>Line</th><th>Code</th><th>Message</th></tr></thead>
          <tbody>${b.errors.data.map((e) => html`<tr><td>${e.line ?? ''}</td><td><code>${e.code}</code></td><td>${e.message}</td></tr>`)}</tbody></table>`
      : null}
  </div>`;
}

/** Batches (CONTRACT §21): the list with status and counts, refreshed while one runs; a batch's detail; cancel. */
export function BatchesScreen({ viewer, projectId }: { viewer: Viewer; projectId: string }) {
  const [tick, setTick] = useState(0);
  const [selected, setSelected] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const list = useQuery(() => gql<{ batches: { edges: { node: Batch }[] } }>(LIST, { projectId }), [projectId, tick]);
  const batches = list.data?.batches.edges.map((e) => e.node) ?? [];
  const active = batches.some((b) => RUNNING.includes(b.status));
  useEffect(() => {
    if (!active) return;
    const timer = setTimeout(() => setTick((t) => t + 1), 2_000);
    return () => clearTimeout(timer);
  }, [active, tick]);
  const canWrite = viewer.scopes.includes('inference:write');
  const cancel = async (id: string) => {
    try {
      await gql(CANCEL, { id });
      setTick(tick + 1);
    } catch (err) {
      setError(err);
    }
  };
  return html`
    <${Card} title="Batches">
      <${ErrorBox} error=${list.error ?? error} />
      ${list.data && batches.length === 0 ? html`<p class="empty">No batches yet. Submit one with POST /v1/files and POST /v1/batches (the OpenAI SDK works unchanged).</p>` : null}
      ${batches.length
        ? html`<table aria-label="Batches">
            <thead><tr><th>Batch</th><th>Endpoint</th><th>Status</th><th>Progress</th><th>Cost</th><th>Created</th><th></th></tr></thead>
            <tbody>${batches.map((b) => html`<tr data-batch-id=${b.id}>
              <td><a href="#/batches" onClick=${(e: Event) => (e.preventDefault(), setSelected(b.id))}><code>${b.id}</code></a></td>
              <td><code>${b.endpoint}</code></td><td><${Status} value=${b.status} /></td><td><${Progress} b=${b} /></td>
              <td>${fmtUsd(b.costUsd)}</td><td>${fmtTime(b.createdAt)}</td>
              <td>${canWrite && ['validating', 'in_progress', 'finalizing'].includes(b.status)
                ? html`<button type="button" onClick=${() => cancel(b.id)}>Cancel</button>` : null}</td>
            </tr>`)}</tbody>
          </table>`
        : null}
    <//>
    ${selected ? html`<${Card} title="Batch"><${Detail} id=${selected} tick=${tick} /><//>` : null}`;
}
