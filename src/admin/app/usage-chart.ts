import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { fmtUsd, html } from './ui.ts';
import { DAY_S, dayOf, dayTooltip, usdTicks, utcSeconds } from './spend-chart.ts';

export interface UsageDay {
  date: string;
  requests: number;
  costUsd: number;
  promptTokens: number;
  completionTokens: number;
}

const fmtCount = (n: number) => n.toLocaleString('en-US');

/** Every day of the window, a day without usage as zero: one day of data is one bar on a dated axis. */
export function fillDays(days: UsageDay[], start: string, end: string): UsageDay[] {
  const byDate = new Map(days.map((d) => [d.date, d]));
  const out: UsageDay[] = [];
  for (let t = utcSeconds(start); t <= utcSeconds(end); t += DAY_S) {
    const date = dayOf(t);
    out.push(byDate.get(date) ?? { date, requests: 0, costUsd: 0, promptTokens: 0, completionTokens: 0 });
  }
  return out;
}

function options(days: UsageDay[], width: number): uPlot.Options {
  const text = '#5b6577';
  const grid = { stroke: '#eef1f5', width: 1 };
  // Cost gets its own axis and line only when there is any (the built-in mock provider is free).
  const hasCost = days.some((d) => d.costUsd > 0);
  const axes: uPlot.Axis[] = [
    { stroke: text, grid, ticks: grid, values: (_u, splits) => splits.map((s) => new Date(s * 1000).toISOString().slice(5, 10)) },
    {
      scale: 'requests',
      label: 'Requests per day',
      stroke: text,
      grid,
      ticks: grid,
      values: (_u, splits) => splits.map((s) => (Number.isInteger(s) ? fmtCount(s) : '')),
    },
  ];
  const series: uPlot.Series[] = [
    {},
    {
      label: 'Requests',
      scale: 'requests',
      fill: '#2457c5cc',
      stroke: '#2457c5',
      paths: uPlot.paths.bars!({ size: [0.7, 48], align: 0 }),
      points: { show: false },
    },
  ];
  if (hasCost) {
    axes.push({
      scale: 'usd',
      side: 1,
      label: 'Cost (USD)',
      size: 70,
      stroke: '#a15c00',
      grid: { show: false },
      ticks: grid,
      values: (_u, splits, _axis, _space, incr) => usdTicks(splits, incr),
    });
    series.push({ label: 'Cost (USD)', scale: 'usd', stroke: '#a15c00', width: 2, points: { show: true, size: 6 } });
  }
  return {
    width,
    height: 220,
    // Dates are UTC days (usage is bucketed by UTC date), whatever the browser's time zone.
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    cursor: { drag: { x: false, y: false }, points: { show: false } },
    legend: { show: false },
    scales: {
      // Half a day either side, so the first and last bars are whole.
      x: { time: true, range: (_u, min, max) => [min - DAY_S / 2, max + DAY_S / 2] },
      requests: { range: (_u, _min, max) => [0, Math.max(1, max) * 1.15] },
      usd: { range: (_u, _min, max) => [0, max * 1.15] },
    },
    axes,
    series,
    plugins: [
      dayTooltip(days.map((d) => d.date), (i) => {
        const d = days[i]!;
        return [d.date, `${fmtCount(d.requests)} request${d.requests === 1 ? '' : 's'}`, `${fmtCount(d.promptTokens + d.completionTokens)} tokens`, `${fmtUsd(d.costUsd)} cost`];
      }),
    ],
  };
}

/** Requests per day as bars and cost as a line, on UTC dates; an empty state when the window holds no usage. */
export function UsageChart({ days, start, end }: { days: UsageDay[]; start: string; end: string }) {
  const host = useRef<HTMLDivElement>(null);
  const filled = fillDays(days, start, end);
  const total = filled.reduce((n, d) => n + d.requests, 0);
  useEffect(() => {
    const el = host.current;
    if (!el || total === 0) return;
    // A day without requests has no bar (a zero-height bar would still draw its outline).
    const data: uPlot.AlignedData = [filled.map((d) => utcSeconds(d.date)), filled.map((d) => d.requests || null)];
    if (filled.some((d) => d.costUsd > 0)) data.push(filled.map((d) => d.costUsd));
    const plot = new uPlot(options(filled, el.clientWidth || 600), data, el);
    const resize = new ResizeObserver(() => plot.setSize({ width: el.clientWidth, height: 220 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [JSON.stringify(filled)]);
  if (total === 0) return html`<p class="empty" data-testid="usage-empty">No requests from ${start} to ${end} (UTC).</p>`;
  return html`${filled.some((d) => d.costUsd > 0) ? null : html`<p class="muted">No cost in this period (free models only).</p>`}
    <div class="usage-chart" ref=${host} role="img"
    aria-label=${`Requests and cost per day from ${start} to ${end}: ${fmtCount(total)} requests in all`}></div>
    <table><thead><tr><th>Day (UTC)</th><th>Requests</th><th>Tokens</th><th>Cost</th></tr></thead>
      <tbody>${filled.filter((d) => d.requests > 0).slice(-7).reverse().map((d) => html`<tr><td>${d.date}</td><td>${fmtCount(d.requests)}</td>
        <td>${fmtCount(d.promptTokens + d.completionTokens)}</td><td>${fmtUsd(d.costUsd)}</td></tr>`)}</tbody></table>`;
}
