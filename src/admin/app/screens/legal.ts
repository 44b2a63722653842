import { useState } from 'preact/hooks';
import { NewVerticalObject, VERTICAL_CREATES } from './verticals-create.ts';
import type { Viewer } from '../viewer.ts';
import { gql } from '../api.ts';
import { patchLines } from '../template-diff.ts';
import { Card, ErrorBox, Pager, Status, fmtTime, html, usePager, useQuery } from '../ui.ts';

interface Matter {
  id: string;
  name: string;
  client: string | null;
  description: string | null;
  status: string;
  closedAt: number | null;
  closeReason: string | null;
  createdAt: number;
}
interface Contract {
  id: string;
  name: string;
  contentType: string;
  bytes: number;
  characters: number;
  sha256: string;
  createdAt: number;
}
interface MappedField {
  name: string;
  value: string | null;
  quote: string | null;
  found: boolean | null;
  quoteVerified: boolean | null;
}
interface Mapping {
  id: string;
  status: string;
  instructions: string | null;
  flaggedQuotes: number | null;
  error: { code: string; message: string } | null;
  fields: MappedField[];
  createdAt: number;
}
interface Edit {
  original: string;
  proposed: string;
  rationale: string;
  applied: boolean;
  notApplied: string | null;
}
interface Redline {
  id: string;
  status: string;
  playbook: string | null;
  instructions: string | null;
  summary: string | null;
  unappliedEdits: number | null;
  diff: string | null;
  error: { code: string; message: string } | null;
  edits: Edit[] | null;
  createdAt: number;
}
type MatterPage = { legalMatters: { edges: { node: Matter }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } };
type MatterView = { legalMatter: Matter & { contracts: { edges: { node: Contract }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } } };
type ContractView = {
  legalContract: Contract & { text: string; mappings: { edges: { node: Mapping }[] }; redlines: { edges: { node: Redline }[] } };
};

const MATTER_FIELDS = 'id name client description status closedAt closeReason createdAt';
const CONTRACT_FIELDS = 'id name contentType bytes characters sha256 createdAt';
const LIST = `query LegalMatters($projectId: ID, $status: String, $after: String) {
  legalMatters(projectId: $projectId, status: $status, first: 20, after: $after) { edges { node { ${MATTER_FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const MATTER = `query LegalMatter($id: ID!, $after: String) { legalMatter(id: $id) { ${MATTER_FIELDS}
  contracts(first: 50, after: $after) { edges { node { ${CONTRACT_FIELDS} } } pageInfo { hasNextPage endCursor } }
} }`;
const CONTRACT = `query LegalContract($id: ID!) { legalContract(id: $id) { ${CONTRACT_FIELDS} text
  mappings(first: 10) { edges { node { id status instructions flaggedQuotes error createdAt fields { name value quote found quoteVerified } } } }
  redlines(first: 10) { edges { node { id status playbook instructions summary unappliedEdits diff error createdAt edits { original proposed rationale applied notApplied } } } }
} }`;

/** A quote's check, as a reviewer reads it: verified in the text, flagged (not in the text), or nothing to check. */
function QuoteCheck({ f }: { f: MappedField }) {
  if (f.quoteVerified === true) return html`<span class="quote-check verified" title="The quote occurs in the contract text">✓ in the contract</span>`;
  if (f.quoteVerified === false) {
    return html`<span class="quote-check flagged" title="The quote does not occur in the contract text: check it by hand">⚠ not in the contract</span>`;
  }
  return html`<span class="muted">—</span>`;
}

function MappingView({ m }: { m: Mapping }) {
  return html`<article class="mapping" data-mapping-id=${m.id}>
    <header><code>${m.id}</code> <${Status} value=${m.status} /> <span class="muted">${fmtTime(m.createdAt)}</span>
      ${m.flaggedQuotes ? html` <strong class="flagged">${m.flaggedQuotes} flagged quote${m.flaggedQuotes === 1 ? '' : 's'}</strong>` : null}</header>
    ${m.instructions ? html`<p class="muted">Instructions: ${m.instructions}</p>` : null}
    ${m.error ? html`<p class="error">${m.error.code}: ${m.error.message}</p>` : null}
    <table aria-label="Mapped fields"><thead><tr><th>Field</th><th>Value</th><th>Quote</th><th>Check</th></tr></thead>
      <tbody>${m.fields.map((f) => html`<tr data-field=${f.name} class=${f.quoteVerified === false ? 'flagged' : ''}>
        <td><code>${f.name}</code></td>
        <td>${f.value ?? html`<span class="muted">${f.found === false ? 'not in the contract' : m.status === 'completed' ? 'no answer' : '…'}</span>`}</td>
        <td class="quote">${f.quote ? html`<q>${f.quote}</q>` : null}</td>
        <td><${QuoteCheck} f=${f} /></td>
      </tr>`)}</tbody></table>
  </article>`;
}

function RedlineView({ r }: { r: Redline }) {
  const lines = r.diff ? patchLines(r.diff) : [];
  return html`<article class="redline" data-redline-id=${r.id}>
    <header><code>${r.id}</code> <${Status} value=${r.status} /> <span class="muted">${fmtTime(r.createdAt)}</span></header>
    ${r.playbook ? html`<p class="muted">Playbook: ${r.playbook}</p>` : null}
    ${r.instructions ? html`<p class="muted">Instructions: ${r.instructions}</p>` : null}
    ${r.error ? html`<p class="error">${r.error.code}: ${r.error.message}</p>` : null}
    ${r.summary ? html`<p>${r.summary}</p>` : null}
    ${r.edits && r.edits.length
      ? html`<table aria-label="Proposed edits"><thead><tr><th>Original</th><th>Proposed</th><th>Rationale</th><th>Applied</th></tr></thead>
          <tbody>${r.edits.map((e) => html`<tr class=${e.applied ? '' : 'flagged'}>
            <td class="before">${e.original}</td><td class="after">${e.proposed}</td><td>${e.rationale}</td>
            <td>${e.applied ? '✓' : html`<span class="flagged">⚠ ${e.notApplied?.replaceAll('_', ' ')}</span>`}</td></tr>`)}</tbody></table>`
      : null}
    ${r.status === 'completed'
      ? lines.length
        ? html`<div class="template-diff redline-diff"><pre class="diff mono" aria-label="Redline diff">${lines.map(
            (d) => html`<div class=${d.op === '+' ? 'added' : d.op === '-' ? 'removed' : d.op === '@' ? 'hunk' : ''}>${d.op === '@' ? d.line : `${d.op} ${d.line}`}</div>`,
          )}</pre></div>`
        : html`<p class="empty">No edit could be applied: the diff is empty.</p>`
      : null}
  </article>`;
}

/** One contract: its facts and text, its mappings (quotes checked) and its redlines (with their diff). */
function ContractScreen({ id, onBack }: { id: string; onBack: () => void }) {
  const view = useQuery(() => gql<ContractView>(CONTRACT, { id }), [id]);
  const c = view.data?.legalContract;
  return html`<${Card} title=${c ? `Contract ${c.name}` : 'Contract'}>
    <p><button type="button" onClick=${onBack}>← The matter</button></p>
    <${ErrorBox} error=${view.error} />
    ${c
      ? html`<dl class="facts" aria-label="Contract">
          <dt>Id</dt><dd><code>${c.id}</code></dd>
          <dt>Type</dt><dd>${c.contentType} · ${c.bytes} B · ${c.characters} characters</dd>
          <dt>SHA-256</dt><dd class="mono sha256">${c.sha256}</dd>
          <dt>Added</dt><dd>${fmtTime(c.createdAt)}</dd>
        </dl>
        <details><summary>Text</summary><pre class="contract-text">${c.text}</pre></details>
        <h3>Mappings</h3>
        ${c.mappings.edges.length === 0
          ? html`<p class="empty">No mappings yet (POST /v1/legal/contracts/${c.id}/mappings).</p>`
          : c.mappings.edges.map(({ node }) => html`<${MappingView} m=${node} />`)}
        <h3>Redlines</h3>
        ${c.redlines.edges.length === 0
          ? html`<p class="empty">No redlines yet (POST /v1/legal/contracts/${c.id}/redlines).</p>`
          : c.redlines.edges.map(({ node }) => html`<${RedlineView} r=${node} />`)}`
      : null}
  <//>`;
}

/** One matter: its facts and its contracts. */
function MatterScreen({ id, onBack, onContract }: { id: string; onBack: () => void; onContract: (id: string) => void }) {
  const pager = usePager();
  const view = useQuery(() => gql<MatterView>(MATTER, { id, after: pager.after }), [id, pager.after]);
  const m = view.data?.legalMatter;
  const rows = m?.contracts.edges.map((e) => e.node) ?? [];
  return html`<${Card} title=${m ? `Matter ${m.name}` : 'Matter'}>
    <p><button type="button" onClick=${onBack}>← All matters</button></p>
    <${ErrorBox} error=${view.error} />
    ${m
      ? html`<dl class="facts" aria-label="Matter">
          <dt>Id</dt><dd><code>${m.id}</code></dd>
          <dt>Status</dt><dd><${Status} value=${m.status} />${m.closedAt ? html` · since ${fmtTime(m.closedAt)}${m.closeReason ? ` (${m.closeReason})` : ''}` : null}</dd>
          <dt>Client</dt><dd>${m.client ?? '—'}</dd>
          ${m.description ? html`<dt>Description</dt><dd>${m.description}</dd>` : null}
        </dl>
        <h3>Contracts</h3>
        ${rows.length === 0
          ? html`<p class="empty">No contracts yet (POST /v1/legal/matters/${m.id}/contracts).</p>`
          : html`<table aria-label="Contracts"><thead><tr><th>Name</th><th>Type</th><th>Size</th><th>SHA-256</th><th>Added</th></tr></thead>
              <tbody>${rows.map((c) => html`<tr data-contract-id=${c.id}>
                <td><a href="#" onClick=${(e: Event) => (e.preventDefault(), onContract(c.id))}>${c.name}</a></td>
                <td>${c.contentType}</td><td>${c.bytes} B</td><td class="mono sha256">${c.sha256}</td><td>${fmtTime(c.createdAt)}</td>
              </tr>`)}</tbody></table>`}
        <${Pager} pager=${pager} hasNext=${m.contracts.pageInfo.hasNextPage} endCursor=${m.contracts.pageInfo.endCursor} />`
      : null}
  <//>`;
}

/** The Legal vertical (CONTRACT §16): matters newest first, a matter's contracts, a contract's mappings and redlines. */
export function LegalScreen({ projectId, viewer }: { projectId: string; viewer: Viewer }) {
  const pager = usePager();
  const [status, setStatus] = useState('');
  const [matter, setMatter] = useState<string | null>(null);
  const [contract, setContract] = useState<string | null>(null);
  const list = useQuery(() => gql<MatterPage>(LIST, { projectId, status: status || null, after: pager.after }), [projectId, status, pager.after]);
  if (contract) return html`<${ContractScreen} id=${contract} onBack=${() => setContract(null)} />`;
  if (matter) return html`<${MatterScreen} id=${matter} onBack=${() => setMatter(null)} onContract=${setContract} />`;
  const rows = list.data?.legalMatters.edges.map((e) => e.node) ?? [];
  return html`<${Card} title="Legal matters">
    <${NewVerticalObject} spec=${VERTICAL_CREATES.legal} projectId=${projectId} scopes=${viewer.scopes} onCreated=${list.reload} />
    <label class="filter">Status <select value=${status} onChange=${(e: Event) => (setStatus((e.target as HTMLSelectElement).value), pager.reset())}>
      <option value="">all</option><option value="open">open</option><option value="closed">closed</option>
    </select></label>
    <${ErrorBox} error=${list.error} />
    ${list.data && rows.length === 0 ? html`<p class="empty">No matters yet.</p>` : null}
    ${rows.length
      ? html`<table aria-label="Legal matters"><thead><tr><th>Name</th><th>Client</th><th>Status</th><th>Opened</th></tr></thead>
          <tbody>${rows.map((m) => html`<tr data-matter-id=${m.id}>
            <td><a href="#" onClick=${(e: Event) => (e.preventDefault(), setMatter(m.id))}>${m.name}</a></td>
            <td>${m.client ?? '—'}</td><td><${Status} value=${m.status} /></td><td>${fmtTime(m.createdAt)}</td>
          </tr>`)}</tbody></table>`
      : null}
    <${Pager} pager=${pager} hasNext=${list.data?.legalMatters.pageInfo.hasNextPage ?? false} endCursor=${list.data?.legalMatters.pageInfo.endCursor ?? null} />
  <//>`;
}
