import { useEffect, useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { Card, ErrorBox, fmtTime, fmtUsd, html, Status, useQuery } from '../ui.ts';

interface Privacy {
  piiRedact: boolean;
  piiUpdatedAt: number | null;
  retentionMode: 'standard' | 'zero';
  retentionDays: number;
  retentionUpdatedAt: number | null;
}

interface Retained {
  id: string;
  requestId: string;
  status: string;
  createdAt: number;
  request: { model: string; messages: { role: string; content: unknown }[] };
  model: string | null;
  route: string | null;
  content: string | null;
  finishReason: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  costUsd: number | null;
  pii: { redacted: Record<string, number> } | null;
}

const GET = `query Privacy($projectId: ID!) { project(id: $projectId) { id privacy { piiRedact piiUpdatedAt retentionMode retentionDays retentionUpdatedAt } } }`;
const SET_PII = `mutation SetPii($projectId: ID!, $redact: Boolean!) { setProjectPii(projectId: $projectId, redact: $redact) { piiRedact } }`;
const SET_RETENTION = `mutation SetRetention($projectId: ID!, $mode: String!, $days: Int) {
  setProjectRetention(projectId: $projectId, mode: $mode, days: $days) { retentionMode retentionDays }
}`;
const INFERENCE = `query Inference($id: ID!) { inference(id: $id) {
  id requestId status createdAt request model route content finishReason promptTokens completionTokens costUsd pii } }`;

/** CONTRACT §11/§12: the project's PII default and retention, both guarded resources (a change may be queued). */
function Settings({ projectId }: { projectId: string }) {
  const q = useQuery(() => gql<{ project: { privacy: Privacy } }>(GET, { projectId }), [projectId]);
  const p = q.data?.project.privacy;
  const [mode, setMode] = useState<'standard' | 'zero'>('standard');
  const [days, setDays] = useState('30');
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState<string | null>(null);
  useEffect(() => {
    if (p) {
      setMode(p.retentionMode);
      setDays(String(p.retentionDays));
    }
  }, [q.data]);
  const daysProblem = mode === 'standard' && !(/^\d+$/.test(days) && Number(days) >= 1 && Number(days) <= 365) ? 'A whole number from 1 to 365.' : null;
  const run = async (what: string, query: string, vars: Record<string, unknown>) => {
    try {
      await gql(query, { projectId, ...vars });
      setError(null);
      setSaved(what);
      q.reload();
    } catch (err) {
      setError(err);
      setSaved(null);
    }
  };
  return html`<${Card} title="PII redaction and retention">
    <${ErrorBox} error=${q.error} />
    ${p
      ? html`<p>PII redaction by default: <strong>${p.piiRedact ? 'on' : 'off'}</strong> (changed ${fmtTime(p.piiUpdatedAt)}).
          Requests may still say <code>pii: {redact, restore}</code> themselves.</p>
        <button type="button" onClick=${() => run('PII default saved.', SET_PII, { redact: !p.piiRedact })}>
          ${p.piiRedact ? 'Turn redaction off' : 'Redact PII by default'}</button>
        <p>Retention: <strong>${p.retentionMode === 'zero' ? 'zero (no content stored anywhere)' : `standard, ${p.retentionDays} days`}</strong>${' '}
          (changed ${fmtTime(p.retentionUpdatedAt)}).</p>
        <form class="inline" aria-label="Edit retention" novalidate onSubmit=${(e: Event) => {
          e.preventDefault();
          if (!daysProblem) void run('Retention saved.', SET_RETENTION, mode === 'zero' ? { mode } : { mode, days: Number(days) });
        }}>
          <div class="field"><label for="retention-mode">Mode</label>
            <select id="retention-mode" value=${mode} onChange=${(e: Event) => setMode((e.target as HTMLSelectElement).value as 'standard' | 'zero')}>
              <option value="standard">standard</option><option value="zero">zero</option></select></div>
          <div class="field"><label for="retention-days">Days</label>
            <input id="retention-days" inputmode="numeric" disabled=${mode === 'zero'} value=${days} aria-invalid=${daysProblem ? 'true' : 'false'}
              aria-describedby="retention-days-error" onInput=${(e: Event) => setDays((e.target as HTMLInputElement).value)} />
            <span class="field-error" id="retention-days-error" aria-live="polite">${daysProblem ?? ''}</span></div>
          <button class="primary" type="submit" disabled=${Boolean(daysProblem)}>Save retention</button>
        </form>`
      : null}
    ${saved ? html`<div class="notice" role="status">${saved}</div>` : null}
    <${ErrorBox} error=${error} />
  <//>`;
}

/** GET /v1/inference/{id} over GraphQL: the retained request and answer (as the provider saw them). */
function Lookup() {
  const [id, setId] = useState('');
  const [found, setFound] = useState<Retained | null>(null);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    try {
      const r = await gql<{ inference: Retained }>(INFERENCE, { id: id.trim() });
      setFound(r.inference);
      setError(null);
    } catch (err) {
      setFound(null);
      setError(err);
    }
  };
  return html`<${Card} title="Retained inference">
    <form class="inline" aria-label="Find a retained inference" onSubmit=${submit}>
      <div class="field"><label for="inference-id">Inference id</label>
        <input id="inference-id" placeholder="inf_…" value=${id} onInput=${(e: Event) => setId((e.target as HTMLInputElement).value)} /></div>
      <button class="primary" type="submit" disabled=${!id.trim().startsWith('inf_')}>Show</button>
    </form>
    <${ErrorBox} error=${error} />
    ${found
      ? html`<dl class="details">
          <dt>Status</dt><dd><${Status} value=${found.status} /></dd>
          <dt>Created</dt><dd>${fmtTime(found.createdAt)}</dd>
          <dt>Request id</dt><dd><code>${found.requestId}</code></dd>
          <dt>Route</dt><dd>${found.route ?? '–'}</dd>
          <dt>Tokens</dt><dd>${found.promptTokens ?? 0} + ${found.completionTokens ?? 0}, ${fmtUsd(found.costUsd)}</dd>
          ${found.pii ? html`<dt>PII redacted</dt><dd>${Object.entries(found.pii.redacted).map(([k, n]) => `${k}: ${n}`).join(', ')}</dd>` : null}
        </dl>
        <h3>Request (${found.request.model})</h3>
        ${found.request.messages.map((m) => html`<pre class="message"><strong>${m.role}</strong>: ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}</pre>`)}
        <h3>Answer</h3><pre class="message">${found.content ?? '(none)'}</pre>`
      : null}
  <//>`;
}

export function PrivacyScreen({ projectId, viewer }: { projectId: string; viewer: { kind: string; scopes: string[] } }) {
  const may = (scope: string) => viewer.kind !== 'key' || viewer.scopes.includes(scope);
  return html`${may('governance:manage') ? html`<${Settings} projectId=${projectId} />` : null}
    ${may('inference:read') ? html`<${Lookup} />` : null}`;
}
