import { useEffect, useState } from 'preact/hooks';
import { ApiError, gql } from '../api.ts';
import type { ScreenProps } from '../viewer.ts';
import { SidePanel } from '../panel.ts';
import { Card, ErrorBox, Pager, Status, fmtTime, fmtUsd, html, usePager, useQuery } from '../ui.ts';

interface Budget {
  projectId: string;
  budgetUsd: number | null;
  spentUsd: number;
  period: string;
  updatedAt: number | null;
}
interface Key {
  id: string;
  name: string;
  scopes: string[];
  status: string;
  budgetUsd: number | null;
  expiresAt: number | null;
  models: string[] | null;
}

const BUDGET = `query Budget($projectId: ID!) { budget(projectId: $projectId) { projectId budgetUsd spentUsd period updatedAt } }`;
const SET_BUDGET = `mutation SetBudget($projectId: ID!, $budgetUsd: Float) { updateBudget(projectId: $projectId, budgetUsd: $budgetUsd) { budgetUsd } }`;
const KEYS = `query BudgetKeys($projectId: ID, $after: String) {
  keys(projectId: $projectId, first: 20, after: $after) { edges { node { id name scopes status budgetUsd expiresAt models } } pageInfo { hasNextPage endCursor } }
}`;
const KEY_SPEND = `query KeySpend($projectId: ID, $startDate: String, $endDate: String) {
  spend(projectId: $projectId, by: "key", startDate: $startDate, endDate: $endDate) { values { value costUsd } }
}`;
const UPDATE_KEY = `mutation UpdateKey($id: ID!, $input: UpdateKeyInput!) { updateKey(id: $id, input: $input) { id name budgetUsd expiresAt models } }`;

const value = (e: Event) => (e.target as HTMLInputElement).value;

/** The month so far, UTC, as the spend query's inclusive dates. */
function monthToDate(): { startDate: string; endDate: string } {
  const today = new Date().toISOString().slice(0, 10);
  return { startDate: `${today.slice(0, 7)}-01`, endDate: today };
}

/** An <input type="datetime-local"> value (UTC) from Unix seconds, and back. */
const toLocalInput = (unix: number | null) => (unix === null ? '' : new Date(unix * 1000).toISOString().slice(0, 16));
const fromLocalInput = (s: string) => Math.floor(Date.parse(`${s}:00Z`) / 1000);

function BudgetBar({ spent, budget }: { spent: number; budget: number | null }) {
  if (budget === null) return null;
  const share = budget > 0 ? spent / budget : spent > 0 ? 1 : 0;
  const cls = share >= 1 ? 'fill over' : share >= 0.8 ? 'fill warn' : 'fill';
  return html`<div class="budget-bar" role="img" aria-label=${`${Math.round(share * 100)}% of the budget spent`}>
    <div class=${cls} style=${`width:${Math.min(100, share * 100)}%`}></div>
    <div class="mark" style="left:80%"><span>80%</span></div><div class="mark" style="left:95%"><span>95%</span></div>
  </div>`;
}

function ProjectBudget({ projectId }: { projectId: string }) {
  const q = useQuery(() => gql<{ budget: Budget }>(BUDGET, { projectId }), [projectId]);
  const [draft, setDraft] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const b = q.data?.budget;
  const shown = draft ?? (b?.budgetUsd === null || b?.budgetUsd === undefined ? '' : String(b.budgetUsd));
  const problem = shown.trim() !== '' && !(Number(shown) >= 0) ? 'A number of dollars, 0 or more (empty: no budget).' : null;
  const save = async (usd: number | null) => {
    try {
      await gql(SET_BUDGET, { projectId, budgetUsd: usd });
      setError(null);
      setDraft(null);
      setSaved(usd === null ? 'The project has no budget now.' : `Saved: requests are refused with 429 budget_exceeded once ${fmtUsd(usd)} is spent this month.`);
      q.reload();
    } catch (err) {
      setError(err);
      setSaved(null);
    }
  };
  return html`<${Card} title="Project budget">
    <${ErrorBox} error=${q.error} />
    ${b
      ? html`<div class="grid">
          <div class="stat"><div class="muted">Budget (monthly)</div><div class="value" data-testid="project-budget">${b.budgetUsd === null ? 'none' : fmtUsd(b.budgetUsd)}</div></div>
          <div class="stat"><div class="muted">Spent in ${b.period}</div><div class="value">${fmtUsd(b.spentUsd)}</div></div>
          <div class="stat"><div class="muted">Last change</div><div class="value" style="font-size:1rem">${fmtTime(b.updatedAt)}</div></div>
        </div>
        <${BudgetBar} spent=${b.spentUsd} budget=${b.budgetUsd} />`
      : null}
    <p class="muted">Calendar month, UTC. Alerts (event <code>budget.threshold</code>) at 80% and 95%; at 100% every key of the project gets 429 budget_exceeded.
      A key's budget is set below; an end customer's on the <a href="#/customers">Customers</a> screen.</p>
    <form class="inline" aria-label="Set the project budget" novalidate onSubmit=${(e: Event) => { e.preventDefault(); if (!problem) void save(shown.trim() === '' ? null : Number(shown)); }}>
      <div class="field"><label for="project-budget-usd">Monthly budget (USD)</label>
        <input id="project-budget-usd" name="budget_usd" inputmode="decimal" placeholder="none" value=${shown} aria-invalid=${problem ? 'true' : 'false'} aria-describedby="project-budget-error"
          onInput=${(e: Event) => { setSaved(null); setDraft(value(e)); }} />
        <span class="field-error" id="project-budget-error" aria-live="polite">${problem ?? ''}</span></div>
      <button class="primary" type="submit" disabled=${problem !== null}>Save budget</button>
      ${b?.budgetUsd !== null && b?.budgetUsd !== undefined ? html`<button type="button" onClick=${() => save(null)}>Remove budget</button>` : null}
    </form>
    ${saved ? html`<div class="notice" role="status">${saved}</div>` : null}
    <${ErrorBox} error=${error} />
  <//>`;
}

/** The side panel that changes a key after creation (POST /v1/keys/{id}, GraphQL updateKey). */
function EditKey({ k, onSaved }: { k: Key; onSaved: () => void }) {
  const [name, setName] = useState(k.name);
  const [budget, setBudget] = useState(k.budgetUsd === null ? '' : String(k.budgetUsd));
  const [expires, setExpires] = useState(toLocalInput(k.expiresAt));
  const [models, setModels] = useState((k.models ?? []).join(', '));
  const [error, setError] = useState<unknown>(null);
  useEffect(() => setError(null), [k.id]);
  const param = error instanceof ApiError ? error.param : null;
  const submit = async (e: Event) => {
    e.preventDefault();
    const list = models.split(/[\s,]+/).filter(Boolean);
    const input = {
      name: name.trim(),
      budgetUsd: budget.trim() === '' ? null : Number(budget),
      expiresAt: expires === '' ? null : fromLocalInput(expires),
      models: list.length ? list : null,
    };
    try {
      await gql(UPDATE_KEY, { id: k.id, input });
      setError(null);
      onSaved();
    } catch (err) {
      setError(err);
    }
  };
  const at = (p: string) => (param === p ? 'true' : 'false');
  return html`<form onSubmit=${submit} aria-label=${`Edit key ${k.name}`} novalidate>
    <p class="muted">Key <code>${k.id}</code>. Scopes never change (create a new key for other scopes). A key can give no
      more than it has: a budget, expiry or model list looser than your own key's is refused.</p>
    <p><label>Name <input name="name" value=${name} maxlength="100" aria-invalid=${at('name')} onInput=${(e: Event) => setName(value(e))} /></label></p>
    <p><label>Monthly budget (USD, empty: none) <input name="budget_usd" inputmode="decimal" value=${budget} aria-invalid=${at('budget_usd')} onInput=${(e: Event) => setBudget(value(e))} /></label></p>
    <p><label>Expires at (UTC, empty: never) <input type="datetime-local" name="expires_at" value=${expires} aria-invalid=${at('expires_at')} onInput=${(e: Event) => setExpires(value(e))} /></label></p>
    <p><label>Models (model, provider/model or provider/*, comma-separated; empty: every model)
      <input name="models" class="mono" value=${models} aria-invalid=${at('models')} onInput=${(e: Event) => setModels(value(e))} /></label></p>
    <p><button class="primary" type="submit">Save key</button></p>
    <${ErrorBox} error=${error} />
  </form>`;
}

function KeyBudgets({ projectId, canSeeSpend }: { projectId: string; canSeeSpend: boolean }) {
  const pager = usePager();
  const [editing, setEditing] = useState<Key | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const keys = useQuery(
    () => gql<{ keys: { edges: { node: Key }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(KEYS, { projectId, after: pager.after }),
    [projectId, pager.after],
  );
  const spend = useQuery(
    () => (canSeeSpend ? gql<{ spend: { values: { value: string; costUsd: number }[] } }>(KEY_SPEND, { projectId, ...monthToDate() }) : Promise.resolve(null)),
    [projectId, canSeeSpend],
  );
  const spentBy = new Map((spend.data?.spend.values ?? []).map((v) => [v.value, v.costUsd]));
  const rows = keys.data?.keys.edges.map((e) => e.node) ?? [];
  return html`<${Card} title="Key budgets, expiry and models">
    <${ErrorBox} error=${keys.error} />
    ${saved ? html`<div class="notice" role="status">${saved}</div>` : null}
    <table aria-label="Key budgets">
      <thead><tr><th>Key</th><th>Status</th><th>Budget</th><th>Spent this month</th><th>Expires</th><th>Models</th><th></th></tr></thead>
      <tbody>${rows.map((k) => html`<tr data-key-id=${k.id}>
        <td><strong>${k.name}</strong><div class="mono muted">${k.id}</div></td><td><${Status} value=${k.status} /></td>
        <td>${k.budgetUsd === null ? 'none' : fmtUsd(k.budgetUsd)}</td>
        <td>${canSeeSpend ? fmtUsd(spentBy.get(k.id) ?? 0) : html`<span class="muted">needs usage:read</span>`}</td>
        <td>${k.expiresAt === null ? 'never' : fmtTime(k.expiresAt)}</td>
        <td>${k.models ? html`<code>${k.models.join(', ')}</code>` : 'every model'}</td>
        <td>${k.status !== 'revoked' ? html`<button type="button" aria-label=${`Edit ${k.name}`} onClick=${() => { setSaved(null); setEditing(k); }}>Edit</button>` : null}</td>
      </tr>`)}</tbody>
    </table>
    ${keys.data && rows.length === 0 ? html`<p class="empty">No keys yet.</p>` : null}
    <${Pager} pager=${pager} hasNext=${keys.data?.keys.pageInfo.hasNextPage ?? false} endCursor=${keys.data?.keys.pageInfo.endCursor ?? null} />
    <${SidePanel} title=${editing ? `Edit key ${editing.name}` : 'Edit key'} open=${editing !== null} onClose=${() => setEditing(null)}>
      ${editing ? html`<${EditKey} key=${editing.id} k=${editing} onSaved=${() => { setSaved(`Saved ${editing.name}: the change applies from the next request on every replica.`); setEditing(null); keys.reload(); }} />` : null}
    <//>
  <//>`;
}

/**
 * Budgets: the project's monthly budget (PUT /v1/projects/{id}/budget) and each key's budget, expiry and models,
 * changed after creation (POST /v1/keys/{id}). Each card shows where the caller's scopes allow it.
 */
export function BudgetsScreen({ projectId, viewer }: ScreenProps) {
  const may = (scope: string) => viewer.scopes.includes(scope);
  return html`
    ${may('budgets:manage') ? html`<${ProjectBudget} projectId=${projectId} />` : html`<${Card} title="Project budget"><p class="muted">Setting the project budget needs <code>budgets:manage</code>.</p><//>`}
    ${may('keys:manage') ? html`<${KeyBudgets} projectId=${projectId} canSeeSpend=${may('usage:read')} />` : html`<${Card} title="Key budgets"><p class="muted">Changing keys needs <code>keys:manage</code>.</p><//>`}`;
}
