import { useState } from 'preact/hooks';
import { ApiError, gql } from '../api.ts';
import { Card, ErrorBox, Pager, fmtTime, fmtUsd, html, usePager, useQuery } from '../ui.ts';

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

/** The budget and windows of one customer: a new one by id, or one of the list. */
function Bounds({ projectId, customer, onSaved }: { projectId: string; customer: Customer | null; onSaved: () => void }) {
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
    try {
      if (what === 'budget') await gql(SET_BUDGET, { projectId, customer: id, budgetUsd: b.value, hardStop });
      else await gql(SET_LIMITS, { projectId, customer: id, requestsPerMinute: r.value, tokensPerMinute: t.value });
      setError(null);
      setSaved(what === 'budget' ? 'Budget saved: it binds the next request on every replica.' : 'Rate limits saved: fresh windows from the next request.');
      onSaved();
    } catch (err) {
      setError(err);
      setSaved(null);
    }
  };
  const field = (label: string, name: string, value: string, set: (v: string) => void, problem: string | null, serverParam: string) => {
    const msg = problem ?? (param === serverParam ? (error as ApiError).message : null);
    return html`<div class="field"><label for=${`customer-${name}`}>${label}</label>
      <input id=${`customer-${name}`} name=${name} value=${value} aria-invalid=${msg ? 'true' : 'false'} aria-describedby=${`customer-${name}-error`}
        onInput=${(e: Event) => { setSaved(null); setError(null); set((e.target as HTMLInputElement).value); }} />
      <span class="field-error" id=${`customer-${name}-error`} aria-live="polite">${msg ?? ''}</span></div>`;
  };
  return html`<div aria-label=${customer ? `Bounds of ${customer.id}` : 'Bound a customer'}>
    ${customer ? null : field('Customer id', 'id', id, setId, null, 'customer')}
    <form class="inline" onSubmit=${(e: Event) => save('budget', e)} aria-label="Customer budget" novalidate>
      ${field('Monthly budget (USD, empty: none)', 'budget', budget, setBudget, b.problem, 'budget_usd')}
      <label class="check"><input type="checkbox" checked=${hardStop} onChange=${(e: Event) => setHardStop((e.target as HTMLInputElement).checked)} />
        Hard stop (429 budget_exceeded); unchecked: alerts only</label>
      <button class="primary" type="submit" disabled=${!!b.problem || id.trim() === ''}>Save budget</button>
    </form>
    <form class="inline" onSubmit=${(e: Event) => save('limits', e)} aria-label="Customer rate limits" novalidate>
      ${field('Requests per minute (empty: none)', 'rpm', rpm, setRpm, r.problem, 'requests_per_minute')}
      ${field('Tokens per minute (empty: none)', 'tpm', tpm, setTpm, t.problem, 'tokens_per_minute')}
      <button type="submit" disabled=${!!r.problem || !!t.problem || id.trim() === ''}>Save rate limits</button>
    </form>
    ${saved ? html`<div class="notice" role="status">${saved}</div>` : null}
    <${ErrorBox} error=${error} />
  </div>`;
}

/**
 * End customers (CONTRACT §22): the customers the project's inferences named (`user`, `metadata.user_id`,
 * X-Svc-Customer) with this month's spend against their budget; set a customer's budget and rate limits.
 */
export function CustomersScreen({ projectId }: { projectId: string }) {
  const pager = usePager();
  const [tick, setTick] = useState(0);
  const [selected, setSelected] = useState<string | null>(null);
  const q = useQuery(
    () => gql<{ customers: { edges: { node: Customer }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(LIST, { projectId, after: pager.after }),
    [projectId, pager.after, tick],
  );
  const rows = q.data?.customers.edges.map((e) => e.node) ?? [];
  const chosen = rows.find((c) => c.id === selected) ?? null;
  const used = (c: Customer) => (c.budgetUsd ? Math.min(100, Math.round((c.spentUsd / c.budgetUsd) * 100)) : null);
  return html`<${Card} title="Customers">
    <p class="muted">The end customers of your product, as inferences name them (<code>user</code>, Anthropic's
      <code>metadata.user_id</code> or the <code>X-Svc-Customer</code> header). A customer's budget and rate limits bind
      beside the key's and the project's; the tightest binds and its error says <code>param: "customer"</code>.</p>
    <${ErrorBox} error=${q.error} />
    ${rows.length === 0 && !q.loading
      ? html`<p class="empty">No customer yet: name one on an inference, or bound one below.</p>`
      : html`<table aria-label="Customers"><thead><tr><th>Customer</th><th>Spend this month</th><th>Budget</th><th>Requests/min</th><th>Tokens/min</th><th>First seen</th></tr></thead>
        <tbody>${rows.map(
          (c) => html`<tr class=${c.id === selected ? 'selected' : ''}>
            <td><button type="button" class="link" onClick=${() => setSelected(c.id === selected ? null : c.id)}><code>${c.id}</code></button></td>
            <td>${fmtUsd(c.spentUsd)}${used(c) !== null ? html` <progress max="100" value=${used(c)} aria-label=${`${used(c)}% of budget`}></progress>` : null}</td>
            <td>${c.budgetUsd === null ? '—' : `${fmtUsd(c.budgetUsd)}${c.hardStop ? '' : ' (alerts only)'}`}</td>
            <td>${c.requestsPerMinute ?? '—'}</td><td>${c.tokensPerMinute ?? '—'}</td><td>${fmtTime(c.createdAt)}</td>
          </tr>`,
        )}</tbody></table>`}
    <${Pager} pager=${pager} hasNext=${q.data?.customers.pageInfo.hasNextPage ?? false} endCursor=${q.data?.customers.pageInfo.endCursor ?? null} />
    <h3>${chosen ? html`Bounds of <code>${chosen.id}</code>` : 'Bound a customer'}</h3>
    <${Bounds} key=${chosen?.id ?? 'new'} projectId=${projectId} customer=${chosen} onSaved=${() => setTick(tick + 1)} />
  <//>`;
}
