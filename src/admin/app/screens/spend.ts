import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { StackedChart, daysBetween, monthToDate, PALETTE, type StackSeries } from '../spend-chart.ts';
import type { ScreenProps } from '../viewer.ts';
import { ErrorBox, fmtUsd, html, useQuery } from '../ui.ts';

type Dimension = 'key' | 'model' | 'customer' | 'route' | 'status';
interface Figures {
  value: string | null;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  costUsd: number;
}
interface Cell extends Figures {
  date: string;
}
interface Report {
  by: Dimension;
  startDate: string;
  endDate: string;
  cells: Cell[];
  values: Figures[];
  otherValues: number;
  totals: Figures;
}

const FIG = 'requests promptTokens completionTokens costUsd';
const SPEND = `query Spend($projectId: ID, $by: String, $startDate: String, $endDate: String, $top: Int) {
  spend(projectId: $projectId, by: $by, startDate: $startDate, endDate: $endDate, top: $top) {
    by startDate endDate otherValues cells { date value ${FIG} } values { value ${FIG} } totals { value ${FIG} }
  }
}`;
const BUDGET = `query Budget($id: ID!) { budget(projectId: $id) { budgetUsd spentUsd period } }`;
const KEYS = `query KeyNames($projectId: ID) { keys(projectId: $projectId, first: 100) { edges { node { id name budgetUsd } } } }`;

/** Values beyond this many are summed as "other" by the server (the CSV export asks for every value). */
const MAX_SERIES = PALETTE.length - 1;

const fmtCount = (n: number) => n.toLocaleString('en-US');
const today = () => new Date().toISOString().slice(0, 10);
const daysAgo = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10);

/** A CSV field: quoted when it holds a comma, a quote or a line break. */
const csvField = (v: string | number) => {
  const s = String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

export function spendCsv(report: Report): string {
  const head = ['date', report.by, 'requests', 'prompt_tokens', 'completion_tokens', 'cost_usd'];
  const rows = report.cells.map((c) => [c.date, c.value ?? 'other', c.requests, c.promptTokens, c.completionTokens, c.costUsd.toFixed(6)]);
  return [head, ...rows].map((r) => r.map(csvField).join(',')).join('\r\n') + '\r\n';
}

function download(name: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/csv;charset=utf-8' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** The chart's series: one per value the server kept, and "other" for the values it summed; one number per day. */
function seriesOf(report: Report, days: string[], metric: 'costUsd' | 'requests', label: (v: string | null) => string): StackSeries[] {
  const values = report.values.map((v) => v.value);
  const index = new Map(days.map((d, i) => [d, i]));
  const series = values.map((v) => ({ label: label(v), values: days.map(() => 0) }));
  for (const c of report.cells) {
    const i = index.get(c.date);
    const at = values.indexOf(c.value);
    if (i !== undefined && at >= 0) series[at]!.values[i]! += c[metric];
  }
  return series;
}

export function SpendScreen({ viewer, projectId }: ScreenProps) {
  const [by, setBy] = useState<Dimension>('key');
  const [range, setRange] = useState({ start: daysAgo(29), end: today() });
  const [draft, setDraft] = useState(range);
  const [metric, setMetric] = useState<'costUsd' | 'requests'>('costUsd');
  const q = useQuery(() => gql<{ spend: Report }>(SPEND, { projectId, by, startDate: range.start, endDate: range.end, top: MAX_SERIES }), [projectId, by, range.start, range.end]);
  const [exportError, setExportError] = useState<unknown>(null);
  // The export has every value, not the chart's few: asked for when the button is pressed.
  const exportCsv = async () => {
    try {
      const full = (await gql<{ spend: Report }>(SPEND, { projectId, by, startDate: range.start, endDate: range.end })).spend;
      download(`spend-${full.by}-${full.startDate}-${full.endDate}.csv`, spendCsv(full));
      setExportError(null);
    } catch (err) {
      setExportError(err);
    }
  };
  const canBudget = viewer.scopes.includes('budgets:manage');
  const canKeys = viewer.scopes.includes('keys:manage');
  const budget = useQuery(
    () => (canBudget ? gql<{ budget: { budgetUsd: number | null; spentUsd: number; period: string } }>(BUDGET, { id: projectId }) : Promise.resolve(null)),
    [projectId],
  );
  const keys = useQuery(
    () => (canKeys ? gql<{ keys: { edges: { node: { id: string; name: string; budgetUsd: number | null } }[] } }>(KEYS, { projectId }) : Promise.resolve(null)),
    [projectId],
  );
  const keyInfo = new Map((keys.data?.keys.edges ?? []).map((e) => [e.node.id, e.node]));
  const label = (v: string | null) =>
    v === null ? `other (${q.data?.spend.otherValues ?? 0} ${by === 'status' ? 'statuses' : `${by}s`})`
      : by === 'key' ? (keyInfo.get(v)?.name ?? v)
        : v === '' ? `(no ${by})`
          : v;
  const report = q.data?.spend ?? null;
  const days = report ? daysBetween(report.startDate, report.endDate) : [];
  const series = report ? seriesOf(report, days, metric, label) : [];
  const projectBudget = budget.data?.budget.budgetUsd ?? null;
  // The month-to-date peak: a budget far above it would flatten the curve to nothing, so it is then said, not drawn.
  const peak = Math.max(0, ...monthToDate(days, days.map((_d, i) => series.reduce((n, s) => n + s.values[i]!, 0))));
  const budgetFits = projectBudget !== null && projectBudget <= peak * 4;
  const budgetLines = metric === 'costUsd' && projectBudget !== null && budgetFits ? [{ label: `Project budget ${fmtUsd(projectBudget)} a month`, value: projectBudget }] : [];
  const apply = (e: Event) => {
    e.preventDefault();
    setRange(draft);
  };

  return html`<section class="card" aria-label="Spend">
    <form class="toolbar" aria-label="Spend range" onSubmit=${apply}>
      <label>From <input type="date" name="start" value=${draft.start} max=${draft.end} onInput=${(e: Event) => setDraft({ ...draft, start: (e.target as HTMLInputElement).value })} /></label>
      <label>To <input type="date" name="end" value=${draft.end} min=${draft.start} onInput=${(e: Event) => setDraft({ ...draft, end: (e.target as HTMLInputElement).value })} /></label>
      <button type="submit">Show</button>
      <label>Split by <select name="by" value=${by} onChange=${(e: Event) => setBy((e.target as HTMLSelectElement).value as Dimension)}>
        <option value="key">key</option><option value="model">model</option><option value="customer">customer</option><option value="route">route</option><option value="status">status</option>
      </select></label>
      <label>Measure <select name="metric" value=${metric} onChange=${(e: Event) => setMetric((e.target as HTMLSelectElement).value as 'costUsd' | 'requests')}>
        <option value="costUsd">cost</option><option value="requests">requests</option>
      </select></label>
      <span class="grow"></span>
      <button type="button" disabled=${!report} onClick=${exportCsv}>Export CSV</button>
    </form>
    <${ErrorBox} error=${q.error ?? budget.error ?? keys.error ?? exportError} />
    ${report
      ? html`<div class="grid totals" data-testid="spend-totals">
          <div class="stat"><div class="muted">Cost</div><div class="value">${fmtUsd(report.totals.costUsd)}</div></div>
          <div class="stat"><div class="muted">Requests</div><div class="value">${fmtCount(report.totals.requests)}</div></div>
          <div class="stat"><div class="muted">Tokens</div><div class="value">${fmtCount(report.totals.promptTokens + report.totals.completionTokens)}</div>
            <div class="muted">${fmtCount(report.totals.promptTokens)} prompt · ${fmtCount(report.totals.completionTokens)} completion</div></div>
          <div class="stat"><div class="muted">Budget this month</div><div class="value">${projectBudget !== null ? fmtUsd(projectBudget) : canBudget ? 'none set' : '—'}</div>
            <div class="muted">${budget.data ? `${fmtUsd(budget.data.budget.spentUsd)} spent in ${budget.data.budget.period}` : canBudget ? '' : 'needs budgets:manage'}</div></div>
        </div>
        ${report.totals.requests === 0
          ? html`<p class="empty">No usage from ${report.startDate} to ${report.endDate} (UTC).</p>`
          : html`<h3>${metric === 'costUsd' ? 'Cost' : 'Requests'} per day by ${by}</h3>
            <${StackedChart} days=${days} series=${series} usd=${metric === 'costUsd'}
              label=${`${metric === 'costUsd' ? 'Cost' : 'Requests'} per day by ${by} from ${report.startDate} to ${report.endDate}: ${metric === 'costUsd' ? fmtUsd(report.totals.costUsd) : fmtCount(report.totals.requests)} in all`} />
            ${metric === 'costUsd'
              ? html`<h3>Month-to-date cost${projectBudget !== null ? ' against the budget' : ''}</h3>
                ${projectBudget !== null && !budgetFits
                  ? html`<p class="muted" data-testid="budget-note">The project budget of ${fmtUsd(projectBudget)} a month is off this scale: the highest month-to-date spend shown is ${fmtUsd(peak)} (${((peak / projectBudget) * 100).toFixed(1)}% of it).</p>`
                  : null}
                <${StackedChart} days=${days} series=${series} usd=${true} cumulative=${true} lines=${budgetLines}
                  label=${`Month-to-date cost by ${by} from ${report.startDate} to ${report.endDate}${projectBudget !== null ? `, against a monthly budget of ${fmtUsd(projectBudget)}` : ''}`} />`
              : null}`}
        <h3>By ${by}</h3>
        <table class="spend-values">
          <thead><tr><th>${by}</th><th class="num">Requests</th><th class="num">Prompt tokens</th><th class="num">Completion tokens</th><th class="num">Cost</th><th class="num">Share</th>${by === 'key' ? html`<th class="num">Key budget</th>` : null}</tr></thead>
          <tbody>${report.values.map((v) => html`<tr>
            <td>${by === 'key' && v.value !== null ? html`${keyInfo.get(v.value)?.name ?? ''} <span class="mono muted">${v.value}</span>` : label(v.value)}</td>
            <td class="num">${fmtCount(v.requests)}</td><td class="num">${fmtCount(v.promptTokens)}</td><td class="num">${fmtCount(v.completionTokens)}</td>
            <td class="num">${fmtUsd(v.costUsd)}</td>
            <td class="num">${report.totals.costUsd > 0 ? `${((v.costUsd / report.totals.costUsd) * 100).toFixed(1)}%` : '—'}</td>
            ${by === 'key' ? html`<td class="num">${fmtUsd(keyInfo.get(v.value ?? '')?.budgetUsd ?? null)}</td>` : null}
          </tr>`)}</tbody>
        </table>`
      : q.loading
        ? html`<p class="muted">Loading…</p>`
        : null}
  </section>`;
}
