import { gql } from '../api.ts';
import type { Viewer } from '../viewer.ts';
import { Card, ErrorBox, fmtTime, fmtUsd, html, useQuery } from '../ui.ts';
import { UsageChart, type UsageDay } from '../usage-chart.ts';

interface Overview {
  project: { id: string; name: string; plan: string; region: string | null; status: string; createdAt: number } | null;
}
interface Limits { rateLimits: { requestsPerMinute: number; tokensPerMinute: number; burst: number } }
interface Budget { budget: { budgetUsd: number | null; spentUsd: number; period: string } }
interface UsageDays { usageByDay: UsageDay[] }

const has = (v: Viewer, scope: string) => v.scopes.includes(scope);

function Needs({ scope }: { scope: string }) {
  return html`<p class="muted">Needs the <code>${scope}</code> scope, which this key does not hold.</p>`;
}

function BudgetBar({ budget, spent }: { budget: number; spent: number }) {
  const ratio = budget > 0 ? spent / budget : 1;
  const cls = ratio >= 1 ? 'over' : ratio >= 0.8 ? 'warn' : '';
  return html`<div class="budget-bar" role="meter" aria-valuemin="0" aria-valuemax=${budget} aria-valuenow=${spent} aria-label="Month-to-date spend against budget">
    <div class=${`fill ${cls}`} style=${`width:${Math.min(100, ratio * 100)}%`}></div>
    <div class="mark" style="left:80%"><span>80%</span></div>
    <div class="mark" style="left:95%"><span>95%</span></div>
  </div>`;
}

export function OverviewScreen({ viewer, projectId }: { viewer: Viewer; projectId: string }) {
  const p = useQuery(() => gql<Overview>(`query P($id: ID!) { project(id: $id) { id name plan region status createdAt } }`, { id: projectId }), [projectId]);
  const l = useQuery(
    () => (has(viewer, 'governance:manage') ? gql<Limits>(`query L($id: ID!) { rateLimits(projectId: $id) { requestsPerMinute tokensPerMinute burst } }`, { id: projectId }) : Promise.resolve(null)),
    [projectId],
  );
  const b = useQuery(
    () => (has(viewer, 'budgets:manage') ? gql<Budget>(`query B($id: ID!) { budget(projectId: $id) { budgetUsd spentUsd period } }`, { id: projectId }) : Promise.resolve(null)),
    [projectId],
  );
  // The last 30 UTC days, today included.
  const [start, end] = [new Date(Date.now() - 29 * 86_400_000).toISOString().slice(0, 10), new Date().toISOString().slice(0, 10)];
  const u = useQuery(
    () => (has(viewer, 'usage:read') ? gql<UsageDays>(`query U($id: ID!, $start: String, $end: String) { usageByDay(projectId: $id, startDate: $start, endDate: $end) { date requests costUsd promptTokens completionTokens } }`, {
            id: projectId,
            start,
            end,
          }) : Promise.resolve(null)),
    [projectId],
  );
  const project = p.data?.project;
  const budget = b.data?.budget;
  return html`
    <${Card} title="Project">
      <${ErrorBox} error=${p.error} />
      ${project ? html`<div class="grid">
        <div class="stat"><div class="muted">Name</div><div class="value">${project.name}</div><code>${project.id}</code></div>
        <div class="stat"><div class="muted">Plan</div><div class="value">${project.plan}</div></div>
        <div class="stat"><div class="muted">Region</div><div class="value">${project.region ?? 'any'}</div></div>
        <div class="stat"><div class="muted">Status</div><div class="value">${project.status}</div><span class="muted">since ${fmtTime(project.createdAt)}</span></div>
      </div>` : null}
    <//>
    <${Card} title="Rate limits">
      ${has(viewer, 'governance:manage')
        ? html`<${ErrorBox} error=${l.error} />${l.data ? html`<div class="grid">
            <div class="stat"><div class="muted">Requests / min</div><div class="value">${l.data.rateLimits.requestsPerMinute}</div></div>
            <div class="stat"><div class="muted">Tokens / min</div><div class="value">${l.data.rateLimits.tokensPerMinute}</div></div>
            <div class="stat"><div class="muted">Burst</div><div class="value">${l.data.rateLimits.burst}</div></div></div>` : null}`
        : html`<${Needs} scope="governance:manage" />`}
    <//>
    <${Card} title="Budget this month">
      ${has(viewer, 'budgets:manage')
        ? html`<${ErrorBox} error=${b.error} />${budget ? html`
            <p>${fmtUsd(budget.spentUsd)} spent in ${budget.period}${budget.budgetUsd !== null ? html` of ${fmtUsd(budget.budgetUsd)}` : ' (no budget set)'}</p>
            ${budget.budgetUsd !== null ? html`<${BudgetBar} budget=${budget.budgetUsd} spent=${budget.spentUsd} />` : null}` : null}`
        : html`<${Needs} scope="budgets:manage" />`}
    <//>
    <${Card} title="Usage per day">
      ${has(viewer, 'usage:read') ? html`<${ErrorBox} error=${u.error} />${u.data ? html`<${UsageChart} days=${u.data.usageByDay} start=${start} end=${end} />` : null}` : html`<${Needs} scope="usage:read" />`}
    <//>`;
}
