import { h, type ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { ApiError } from './api.ts';
import type { Group } from './catalog.ts';

export const html = htm.bind(h);

export const fmtTime = (unix: number | null | undefined): string =>
  unix === null || unix === undefined ? '—' : new Date(unix * 1000).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';

export const fmtUsd = (usd: number | null | undefined): string =>
  usd === null || usd === undefined ? '—' : `$${usd.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 6 })}`;

export function Status({ value }: { value: string }) {
  return html`<span class=${`status ${value}`}>${value}</span>`;
}

/** Shows an API error with its code and request id; a 429 says when to retry; a change queued for dual control is no error. */
export function ErrorBox({ error, headline }: { error: unknown; headline?: string }) {
  if (!error) return null;
  if (error instanceof ApiError && error.code === 'dual_control_required' && error.approvalId) return html`<${QueuedBanner} approvalId=${error.approvalId} />`;
  if (error instanceof ApiError) {
    const retry =
      error.httpStatus === 429 && error.retryAt
        ? html`<div>Retry after ${fmtTime(error.retryAt)} (in ${Math.max(0, Math.ceil(error.retryAt - Date.now() / 1000))} s).</div>`
        : null;
    return html`<div class="error" role="alert">
      <strong>${headline ?? error.message}</strong>
      <div>code <code>${error.code}</code>${error.param ? html`, param <code>${error.param}</code>` : null}
        ${error.requestId ? html`, request id <code>${error.requestId}</code>` : null}</div>
      ${retry}
    </div>`;
  }
  return html`<div class="error" role="alert"><strong>${String((error as Error)?.message ?? error)}</strong></div>`;
}

/** The project keeps this resource under dual control: the change waits for a second key (the Approvals screen). */
export function QueuedBanner({ approvalId }: { approvalId: string }) {
  return html`<div class="notice queued" role="status">
    <strong>Queued for approval <code>${approvalId}</code></strong>
    <div>Nothing has changed yet: another key must approve it on the <a href="#/approvals">Approvals</a> screen within 24 hours.</div>
  </div>`;
}

export function Card({ title, children }: { title: string; children: ComponentChildren }) {
  return html`<section class="card" aria-label=${title}><h2>${title}</h2>${children}</section>`;
}

/** Runs a query and re-runs it on demand; errors are kept to be shown, never thrown into the page. */
export function useQuery<T>(run: () => Promise<T>, deps: unknown[]) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const reload = useCallback(() => {
    setLoading(true);
    run()
      .then((d) => {
        setData(d);
        setError(null);
      })
      .catch(setError)
      .finally(() => setLoading(false));
  }, deps);
  useEffect(reload, [reload]);
  return { data, error, loading, reload };
}

/** Cursor paging over a Relay connection: `after` for older pages, a stack to go back. */
export function usePager() {
  const [stack, setStack] = useState<(string | null)[]>([null]);
  const after = stack[stack.length - 1] ?? null;
  return {
    after,
    page: stack.length,
    next: (cursor: string) => setStack([...stack, cursor]),
    prev: () => setStack(stack.length > 1 ? stack.slice(0, -1) : stack),
    reset: () => setStack([null]),
  };
}

export function Pager({ pager, hasNext, endCursor }: { pager: ReturnType<typeof usePager>; hasNext: boolean; endCursor: string | null }) {
  return html`<div class="pager">
    <button type="button" onClick=${pager.prev} disabled=${pager.page <= 1}>Newer</button>
    <span class="muted">page ${pager.page}</span>
    <button type="button" onClick=${() => endCursor && pager.next(endCursor)} disabled=${!hasNext}>Older</button>
  </div>`;
}

/**
 * "Copied" belongs to the value that was copied: when the same button is shown a new value (a rotated secret), it
 * offers to copy again. A clipboard the browser refuses is said, never shown as copied.
 */
export function Copy({ text, label }: { text: string; label: string }) {
  const [copied, setCopied] = useState<{ text: string; ok: boolean } | null>(null);
  const state = copied?.text === text ? copied : null;
  return html`<button
    type="button"
    onClick=${async () => {
      const ok = await navigator.clipboard.writeText(text).then(() => true, () => false);
      setCopied({ text, ok });
    }}
  >${state ? (state.ok ? 'Copied' : 'Copy failed: select the text') : label}</button>`;
}

/**
 * Checkboxes grouped by area, each with its one-line description. `only` narrows the choice (a key can grant only the
 * scopes it holds); an area with nothing left is not shown.
 */
export function GroupedChecks({ legend, name, groups, only, selected, onToggle }: {
  legend: string;
  name: string;
  groups: Group[];
  only?: string[];
  selected: string[];
  onToggle: (value: string) => void;
}) {
  const known = new Set(groups.flatMap((g) => g.entries.map((e) => e.name)));
  const other = (only ?? []).filter((n) => !known.has(n)).map((n) => ({ name: n, description: '' }));
  const shown = [...groups, { area: 'Other', entries: other }]
    .map((g) => ({ ...g, entries: g.entries.filter((e) => !only || only.includes(e.name)) }))
    .filter((g) => g.entries.length > 0);
  return html`<fieldset class="grouped"><legend>${legend}</legend>
    <div class="groups">${shown.map((g) => html`<div class="group" role="group" aria-label=${g.area}>
      <h3>${g.area}</h3>
      ${g.entries.map((e) => {
        const id = `${name}-${e.name.replace(/[^a-z0-9]/gi, '-')}`;
        return html`<div class="check">
          <input type="checkbox" id=${id} name=${name} value=${e.name} checked=${selected.includes(e.name)}
            aria-describedby=${`${id}-desc`} onChange=${() => onToggle(e.name)} />
          <label for=${id}><code>${e.name}</code></label>
          <span class="desc" id=${`${id}-desc`}>${e.description}</span>
        </div>`;
      })}
    </div>`)}</div>
  </fieldset>`;
}
