import { html } from '../ui.ts';

/** A timeline step as requestDetail answers it (offsets in ms from the request's start). */
export interface Step {
  step: string;
  atMs: number;
  offsetMs: number;
  durationMs: number | null;
  status: string;
  detail: string;
}

export interface Hop {
  route: string;
  model: string;
  startMs: number;
  durationMs: number;
  outcome: string;
  error: string | null;
}

export interface Timings {
  authenticatedMs: number | null;
  admittedMs: number | null;
  answeredMs: number | null;
  totalMs: number;
  hops: Hop[];
}

export const TIMING_FIELDS = 'traceId timings { authenticatedMs admittedMs answeredMs totalMs hops { route model startMs durationMs outcome error } } timeline { step atMs offsetMs durationMs status detail }';

/** 0.4 ms, 12.5 ms, 230 ms, 1.25 s. */
export const fmtDuration = (ms: number): string =>
  ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : ms >= 100 ? `${Math.round(ms)} ms` : `${Math.round(ms * 10) / 10} ms`;

/** The status pill's class for a step's or a hop's outcome. */
const pill = (status: string) => (status === 'ok' ? 'succeeded' : status === 'skipped' || status === 'circuit_open' ? 'skipped' : 'failed');

/**
 * The steps as a waterfall: one row per step (a provider hop is a step), its bar placed and sized in proportion to
 * the request's whole time. A record without timings has no durations: its steps are listed without bars.
 */
export function Waterfall({ steps, recorded }: { steps: Step[]; recorded: boolean }) {
  const span = Math.max(1, ...steps.map((s) => s.offsetMs + (s.durationMs ?? 0)));
  const pct = (ms: number) => `${Math.min(100, Math.max(0, (ms / span) * 100)).toFixed(2)}%`;
  return html`${recorded ? null : html`<p class="muted">Recorded before timings were kept: the steps are derived from the usage record, without durations.</p>`}
    <ol class="waterfall request-timeline" aria-label="Timeline">${steps.map((s) => html`<li class=${`step ${s.status}`}>
      <span class="wf-step"><strong>${s.step}</strong> <span class=${`status ${pill(s.status)}`}>${s.status}</span></span>
      <span class="wf-track" aria-hidden="true">${s.durationMs === null
        ? null
        : html`<span class=${`wf-bar ${pill(s.status)}`} style=${`margin-left: min(${pct(s.offsetMs)}, calc(100% - 2px)); width: ${pct(s.durationMs)}`}></span>`}</span>
      <span class="wf-time"><span class="offset">+${fmtDuration(s.offsetMs)}</span>${s.durationMs ? html` <span class="muted">(${fmtDuration(s.durationMs)})</span>` : null}</span>
      <span class="wf-detail">${s.detail}</span>
    </li>`)}</ol>`;
}

/** The provider hops with their outcomes, in order: which one failed, which one was skipped, which one answered. */
export function Hops({ hops, cacheHit }: { hops: Hop[]; cacheHit: boolean }) {
  if (hops.length === 0) return html`<p class="muted">No provider was asked${cacheHit ? ': the answer came from the response cache' : ''}.</p>`;
  return html`<div class="table-scroll"><table class="hops" data-testid="provider-hops">
    <thead><tr><th>#</th><th>Route</th><th>Outcome</th><th class="num">Start</th><th class="num">Duration</th></tr></thead>
    <tbody>${hops.map((h, i) => html`<tr>
      <td>${i + 1}</td>
      <td class="mono">${h.route}</td>
      <td><span class=${`status ${pill(h.outcome)}`}>${h.outcome === 'circuit_open' ? 'circuit open' : h.outcome}</span>${h.error ? html` <code>${h.error}</code>` : null}${h.outcome !== 'ok' && i < hops.length - 1 ? html` <span class="muted">→ fell back</span>` : null}</td>
      <td class="num">+${fmtDuration(h.startMs)}</td>
      <td class="num">${h.outcome === 'circuit_open' ? '—' : fmtDuration(h.durationMs)}</td>
    </tr>`)}</tbody>
  </table></div>`;
}
