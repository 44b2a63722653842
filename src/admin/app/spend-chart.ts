import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { fmtUsd, html } from './ui.ts';

export const DAY_S = 86_400;
export const utcSeconds = (date: string) => Date.parse(`${date}T00:00:00Z`) / 1000;
export const dayOf = (unix: number) => new Date(unix * 1000).toISOString().slice(0, 10);

/** Series colours: distinguishable from each other and readable on both themes' cards (a legend names each). */
export const PALETTE = ['#3b6fd8', '#d9822b', '#2f9e6a', '#a855c7', '#d24b5a', '#1f9fb4', '#8a8f2a', '#7a869a'];

const css = (name: string) => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#5b6577';

/** Every UTC day from start to end, inclusive. */
export function daysBetween(start: string, end: string): string[] {
  const out: string[] = [];
  for (let t = utcSeconds(start); t <= utcSeconds(end); t += DAY_S) out.push(dayOf(t));
  return out;
}

/** Running sums that start again on the first of each month (budgets are monthly, CONTRACT §7). */
export function monthToDate(days: string[], values: number[]): number[] {
  const out: number[] = [];
  values.forEach((v, i) => {
    const sameMonth = i > 0 && days[i]!.slice(0, 7) === days[i - 1]!.slice(0, 7);
    out.push((sameMonth ? out[i - 1]! : 0) + v);
  });
  return out;
}

export interface StackSeries {
  label: string;
  /** One value per day (USD or a count), 0 for none. */
  values: number[];
}

/** Dollar ticks with as many decimals as the tick step needs ($0.002, $0.50, $12). */
export function usdTicks(splits: number[], incr: number): string[] {
  const decimals = Math.min(6, Math.max(0, -Math.floor(Math.log10(incr || 1))));
  return splits.map((s) => `$${s.toFixed(decimals)}`);
}

/** A tooltip over the plot for the day under the cursor (uPlot draws no tooltip of its own): `linesAt(i)` for day i. */
export function dayTooltip(days: string[], linesAt: (i: number) => string[]): uPlot.Plugin {
  let tip: HTMLDivElement;
  return {
    hooks: {
      init: (u) => {
        tip = document.createElement('div');
        tip.className = 'chart-tip';
        tip.setAttribute('role', 'tooltip');
        tip.hidden = true;
        u.over.appendChild(tip);
      },
      setCursor: (u) => {
        const i = u.cursor.idx;
        if (i === null || i === undefined || u.cursor.left === undefined || u.cursor.left < 0) {
          tip.hidden = true;
          return;
        }
        tip.textContent = '';
        for (const line of linesAt(i)) {
          const div = document.createElement('div');
          div.textContent = line;
          tip.appendChild(div);
        }
        tip.hidden = false;
        const x = u.valToPos(utcSeconds(days[i]!), 'x');
        tip.style.left = `${Math.min(x + 10, u.over.clientWidth - tip.offsetWidth)}px`;
        tip.style.top = `${Math.max(0, (u.cursor.top ?? 0) - tip.offsetHeight - 8)}px`;
      },
    },
  };
}

/**
 * Bars per day stacked by series (uPlot draws no stacks: each series is drawn as the running sum, the tallest first,
 * so each shows its own band). `lines` adds horizontal reference lines (a budget) on the same scale.
 */
export function StackedChart({ days, series, usd, label, lines = [], cumulative = false }: {
  days: string[];
  series: StackSeries[];
  usd: boolean;
  label: string;
  lines?: { label: string; value: number }[];
  cumulative?: boolean;
}) {
  const host = useRef<HTMLDivElement>(null);
  const key = JSON.stringify([days, series, lines, cumulative, document.documentElement.dataset.theme]);
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const fmt = usd ? (n: number) => fmtUsd(n) : (n: number) => n.toLocaleString('en-US');
    const shown = cumulative ? series.map((s) => ({ ...s, values: monthToDate(days, s.values) })) : series;
    const sums: number[][] = [];
    let running = days.map(() => 0);
    for (const s of shown) {
      running = running.map((r, i) => r + s.values[i]!);
      sums.push(running);
    }
    const text = css('--muted');
    const grid = { stroke: css('--line'), width: 1 };
    const data: uPlot.AlignedData = [days.map(utcSeconds), ...sums.slice().reverse().map((row) => row.map((v) => v || null))];
    for (const line of lines) data.push(days.map(() => line.value));
    const opts: uPlot.Options = {
      width: el.clientWidth || 600,
      height: 260,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      cursor: { drag: { x: false, y: false }, points: { show: false } },
      legend: { show: false },
      scales: {
        x: { time: true, range: (_u, min, max) => [min - DAY_S / 2, max + DAY_S / 2] },
        y: { range: (_u, _min, max) => [0, Math.max(usd ? 0.000001 : 1, max, ...lines.map((l) => l.value)) * 1.15] },
      },
      axes: [
        { stroke: text, grid, ticks: grid, values: (_u, splits) => splits.map((s) => new Date(s * 1000).toISOString().slice(5, 10)) },
        { stroke: text, grid, ticks: grid, size: 70, values: (_u, splits, _a, _s, incr) => (usd ? usdTicks(splits, incr) : splits.map((s) => (Number.isInteger(s) ? s.toLocaleString('en-US') : ''))) },
      ],
      series: [
        {},
        ...shown
          .map((s, i) => ({
            label: s.label,
            fill: PALETTE[i % PALETTE.length],
            stroke: PALETTE[i % PALETTE.length],
            width: 0,
            paths: cumulative ? undefined : uPlot.paths.bars!({ size: [0.7, 48], align: 0 }),
            points: { show: false },
          }))
          .reverse(),
        ...lines.map((l) => ({ label: l.label, stroke: css('--danger'), width: 2, dash: [6, 4], points: { show: false } })),
      ],
      plugins: [dayTooltip(days, (i) => [days[i]!, ...shown.filter((s) => s.values[i]! > 0).map((s) => `${s.label}: ${fmt(s.values[i]!)}`)])],
    };
    const plot = new uPlot(opts, data, el);
    const resize = new ResizeObserver(() => plot.setSize({ width: el.clientWidth, height: 260 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [key]);
  return html`<div class="usage-chart spend-chart" ref=${host} role="img" aria-label=${label}></div>
    <ul class="legend" aria-label="Legend">
      ${series.map((s, i) => html`<li><span class="swatch" data-color=${i % PALETTE.length}></span>${s.label}</li>`)}
      ${lines.map((l) => html`<li><span class="swatch budget"></span>${l.label}</li>`)}
    </ul>`;
}
