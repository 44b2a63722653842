import { useState } from 'preact/hooks';
import { ApiError, gql } from '../api.ts';
import { SidePanel } from '../panel.ts';
import { ErrorBox, Pager, fmtTime, fmtUsd, html, usePager, useQuery } from '../ui.ts';
import type { ScreenProps } from '../viewer.ts';

/** An end customer of the project (CONTRACT §22), as the GraphQL twin of GET /v1/projects/{id}/customers answers it. */
interface Customer {
  id: string;
  budgetUsd: number | null;
  hardStop: boolean;
  spentUsd: number;
  period: string;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  createdAt: number;
  updatedAt: number | null;
}

const FIELDS = 'id budgetUsd hardStop spentUsd period requestsPerMinute tokensPerMinute createdAt updatedAt';
const LIST = `query Customers($projectId: ID!, $after: String) {
  customers(projectId: $projectId, first: 25, after: $after) { edges { node { ${FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const SET_BUDGET = `mutation CustomerBudget($projectId: ID!, $customer: String!, $budgetUsd: Float, $hardStop: Boolean) {
  updateCustomerBudget(projectId: $projectId, customer: $customer, budgetUsd: $budgetUsd, hardStop: $hardStop) { ${FIELDS} }
}`;
const SET_LIMITS = `mutation CustomerLimits($projectId: ID!, $customer: String!, $requestsPerMinute: Int, $tokensPerMinute: Int) {
  updateCustomerRateLimits(projectId: $projectId, customer: $customer, requestsPerMinute: $requestsPerMinute, tokensPerMinute: $tokensPerMinute) { ${FIELDS} }
}`;

const MAX_LIMIT = 2_147_483_647;

/** '' is "none" (null); else a whole number from 1 (the API's rule, checked again by the gateway). */
function limitOf(v: string): { value: number | null; problem: string | null } {
  const t = v.trim();
  if (t === '') return { value: null, problem: null };
  if (!/^\d+$/.test(t) || Number(t) < 1 || Number(t) > MAX_LIMIT) return { value: null, problem: 'A whole number of at least 1, or empty for none.' };
  return { value: Number(t), problem: null };
}

function budgetOf(v: string): { value: number | null; problem: string | null } {
  const t = v.trim();
  if (t === '') return { value: null, problem: null };
  const n = Number(t);
  if (!Number.isFinite(n) || n < 0) return { value: null, problem: 'An amount in USD of at least 0, or empty for none.' };
  return { value: n, problem: null };
}

/** This month's spend against the budget: a bar and its share in words ("<1%" rather than a bar that shows nothing). */
function Meter({ spent, budget, who }: { spent: number; budget: number; who: string }) {
  const share = budget > 0 ? spent / budget : spent > 0 ? 1 : 0;
  const pct = share > 0 && share < 0.01 ? '<1%' : `${Math.round(share * 100)}%`;
  const cls = share >= 1 ? 'fill over' : share >= 0.8 ? 'fill warn' : 'fill';
  return html`<div class="meter" role="img" aria-label=${`${pct} of the budget of ${who} spent`}>
    <span class="bar"><span class=${cls} style=${`width:${Math.min(100, share * 100)}%`}></span></span><span class="pct">${pct}</span></div>`;
}

/** The side panel's forms: the budget and windows of one customer, a new one by id or one of the list. */
function Bounds({ projectId, customer, canBudget, canLimits, onSaved }: {
  projectId: string;
  customer: Customer | null;
  canBudget: boolean;
  canLimits: boolean;
  onSaved: () => void;
}) {
  const [id, setId] = useState(customer?.id ?? '');
  const [budget, setBudget] = useState(customer?.budgetUsd === null || customer === null ? '' : String(customer.budgetUsd));
  const [hardStop, setHardStop] = useState(customer?.hardStop ?? true);
  const [rpm, setRpm] = useState(customer?.requestsPerMinute == null ? '' : String(customer.requestsPerMinute));
  const [tpm, setTpm] = useState(customer?.tokensPerMinute == null ? '' : String(customer.tokensPerMinute));
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const b = budgetOf(budget);
  const r = limitOf(rpm);
  const t = limitOf(tpm);
  const param = error instanceof ApiError ? error.param : null;
  const save = async (what: 'budget' | 'limits', e: Event) => {
    e.preventDefault();
    const who = id.trim();
    try {
      if (what === 'budget') await gql(SET_BUDGET, { projectId, customer: who, budgetUsd: b.value, hardStop });
      else await gql(SET_LIMITS, { projectId, customer: who, requestsPerMinute: r.value, tokensPerMinute: t.value });
      setError(null);
      setSaved(what === 'budget'
        ? `Saved the budget of ${who}: it binds the next request on every replica.`
        : `Saved the rate limits of ${who}: fresh windows from the next request.`);
      onSaved();
    } catch (err) {
      setError(err);
      setSaved(null);
    }
  };
  const field = (label: string, name: string, value: string, set: (v: string) => void, problem: string | null, serverParam: string, mode = 'numeric') => {
    const msg = problem ?? (param === serverParam ? (error as ApiError).message : null);
    return html`<div class="field"><label for=${`customer-${name}`}>${label}</label>
      <input id=${`customer-${name}`} name=${name} value=${value} inputmode=${mode} aria-invalid=${msg ? 'true' : 'false'} aria-describedby=${`customer-${name}-error`}
        onInput=${(e: Event) => { setError(null); setSaved(null); set((e.target as HTMLInputElement).value); }} />
      <span class="field-error" id=${`customer-${name}-error`} aria-live="polite">${msg ?? ''}</span></div>`;
  };
  const noId = id.trim() === '';
  return html`<div>
    ${customer
      ? html`<p class="muted">Spent ${fmtUsd(customer.spentUsd)} in ${customer.period} (calendar month, UTC).</p>`
      : html`<p class="muted">A customer the project has not seen yet can be bounded before its first request.</p>
        ${field('Customer id (as inferences name it)', 'id', id, setId, null, 'customer', 'text')}`}
    ${canBudget
      ? html`<form onSubmit=${(e: Event) => save('budget', e)} aria-label="Customer budget" novalidate>
      <h3>Monthly budget</h3>
      ${field('Budget (USD, empty: none)', 'budget', budget, setBudget, b.problem, 'budget_usd', 'decimal')}
      <label class="inline-check"><input type="checkbox" name="hard_stop" checked=${hardStop} onChange=${(e: Event) => setHardStop((e.target as HTMLInputElement).checked)} />
        Hard stop (429 budget_exceeded); unchecked: alerts only</label>
      <p><button class="primary" type="submit" disabled=${!!b.problem || noId}>Save budget</button></p>
    </form>`
      : html`<p class="muted">Setting a customer's budget needs <code>budgets:manage</code>.</p>`}
    ${canLimits
      ? html`<form onSubmit=${(e: Event) => save('limits', e)} aria-label="Customer rate limits" novalidate>
      <h3>Rate limits</h3>
      ${field('Requests per minute (empty: none)', 'rpm', rpm, setRpm, r.problem, 'requests_per_minute')}
      ${field('Tokens per minute (empty: none)', 'tpm', tpm, setTpm, t.problem, 'tokens_per_minute')}
      <p><button type="submit" disabled=${!!r.problem || !!t.problem || noId}>Save rate limits</button></p>
    </form>`
      : html`<p class="muted">Setting a customer's rate limits needs <code>governance:manage</code>.</p>`}
    ${saved ? html`<div class="notice" role="status">${saved}</div>` : null}
    <${ErrorBox} error=${error} headline=${param && ['budget_usd', 'requests_per_minute', 'tokens_per_minute'].includes(param) ? 'Not saved: the gateway refused a value (shown at its field).' : undefined} />
  </div>`;
}

/**
 * End customers (CONTRACT §22): the customers the project's inferences named (`user`, `metadata.user_id`,
 * X-Svc-Customer) with this month's spend against their budget; a customer's budget (budgets:manage) and rate limits
 * (governance:manage) are set in the side panel.
 */
export function CustomersScreen({ projectId, viewer }: ScreenProps) {
  const pager = usePager();
  const [panel, setPanel] = useState<{ customer: Customer | null } | null>(null);
  const canBudget = viewer.scopes.includes('budgets:manage');
  const canLimits = viewer.scopes.includes('governance:manage');
  const canBound = canBudget || canLimits;
  const q = useQuery(
    () => gql<{ customers: { edges: { node: Customer }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(LIST, { projectId, after: pager.after }),
    [projectId, pager.after],
  );
  const rows = q.data?.customers.edges.map((e) => e.node) ?? [];
  const open = (customer: Customer | null) => setPanel({ customer });
  return html`<section class="card" aria-label="Customers">
    <div class="card-head"><h2>Customers</h2>
      ${canBound ? html`<button type="button" class="primary" onClick=${() => open(null)}>Bound a customer</button>` : null}</div>
    <p class="muted">The end customers of your product, as inferences name them (<code>user</code>, Anthropic's <code>metadata.user_id</code> or
      the <code>X-Svc-Customer</code> header). A customer's budget and rate limits bind
      beside the key's and the project's; the tightest binds and its error says <code>param: "customer"</code>.
      ${canBound ? null : html` Setting them needs <code>budgets:manage</code> (budget) or <code>governance:manage</code> (rate limits).`}</p>
    <${ErrorBox} error=${q.error} />
    ${rows.length === 0 && !q.loading
      ? html`<p class="empty">No customer yet. Name one on an inference (<code>"user": "cus_42"</code>)${canBound ? ', or bound one before its first request with “Bound a customer”' : ''}.</p>`
      : html`<div class="table-scroll"><table aria-label="Customers" class="customers"><thead><tr><th>Customer</th><th class="num">Spend this month</th><th>Budget</th>
        <th class="num">Requests/min</th><th class="num">Tokens/min</th><th>First seen</th>${canBound ? html`<th><span class="sr-only">Actions</span></th>` : null}</tr></thead>
        <tbody>${rows.map(
          (c) => html`<tr data-customer=${c.id}>
            <td><code>${c.id}</code></td>
            <td class="num">${fmtUsd(c.spentUsd)}${c.budgetUsd !== null ? html`<${Meter} spent=${c.spentUsd} budget=${c.budgetUsd} who=${c.id} />` : null}</td>
            <td>${c.budgetUsd === null ? html`<span class="muted">none</span>` : `${fmtUsd(c.budgetUsd)}${c.hardStop ? '' : ' (alerts only)'}`}</td>
            <td class="num">${c.requestsPerMinute ?? html`<span class="muted">none</span>`}</td><td class="num">${c.tokensPerMinute ?? html`<span class="muted">none</span>`}</td>
            <td>${fmtTime(c.createdAt)}</td>
            ${canBound ? html`<td><button type="button" aria-label=${`Set bounds of ${c.id}`} onClick=${() => open(c)}>Set bounds</button></td>` : null}
          </tr>`,
        )}</tbody></table></div>`}
    <${Pager} pager=${pager} hasNext=${q.data?.customers.pageInfo.hasNextPage ?? false} endCursor=${q.data?.customers.pageInfo.endCursor ?? null} />
    <${SidePanel} title=${panel?.customer ? `Bounds of ${panel.customer.id}` : 'Bound a customer'} open=${panel !== null} onClose=${() => setPanel(null)}>
      ${panel ? html`<${Bounds} key=${panel.customer?.id ?? 'new'} projectId=${projectId} customer=${panel.customer} canBudget=${canBudget} canLimits=${canLimits}
        onSaved=${q.reload} />` : null}
    <//>
  </section>`;
}
