import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { gql } from './api.ts';
import { AREAS, type Screen } from './nav.ts';
import type { Theme } from './theme.ts';
import { html, useQuery } from './ui.ts';

/** A screen the caller cannot use, and the scopes (any one) that would show it. */
export interface HiddenScreen {
  screen: Screen;
  scopes: string[];
}

/** What the navigation says about the screens the caller's scopes leave out. */
export interface MoreScreens {
  /**
   * One line for the navigation, longest first ("4 more screens need: risk:read, ops:read, +2", …, "4 more screens need 4
   * scopes", "4 more screens"): the navigation shows the first that fits its width.
   */
  summaries: string[];
  /** Every scope with the screens it would show, as one sentence (the summary's title). */
  full: string;
  /** Each scope once, with the screens it would show (a screen any of several scopes shows is under its first). */
  byScope: { scope: string; titles: string[] }[];
  /** Screens no project key's scope shows. */
  unavailable: string[];
}

export function moreScreens(hidden: HiddenScreen[]): MoreScreens | null {
  if (hidden.length === 0) return null;
  const grouped = new Map<string, string[]>();
  const unavailable: string[] = [];
  for (const h of hidden) {
    const scope = h.scopes[0];
    if (scope) grouped.set(scope, [...(grouped.get(scope) ?? []), h.screen.title]);
    else unavailable.push(h.screen.title);
  }
  const byScope = [...grouped].map(([scope, titles]) => ({ scope, titles }));
  const scopes = byScope.map((g) => g.scope);
  const n = hidden.length;
  const head = `${n} more screen${n === 1 ? ' needs' : 's need'}`;
  // As many scopes as fit, then "+K" for the rest; the whole list is one click (or the title) away.
  const summaries = [
    ...scopes.map((_, left) => `${head}: ${scopes.slice(0, scopes.length - left).join(', ')}${left ? `, +${left}` : ''}`),
    ...(n === 1 && scopes.length === 1 ? [`${hidden[0]!.screen.title} needs ${scopes[0]}`] : []),
    ...(scopes.length > 1 ? [`${head} ${scopes.length} scopes`] : scopes.length === 0 ? [`${n} more screen${n === 1 ? '' : 's'}, not for this key`] : []),
    `${n} more screen${n === 1 ? '' : 's'}`,
  ];
  const full = [
    ...(byScope.length ? [`Scopes that would show more screens: ${byScope.map((g) => `${g.scope} (${g.titles.join(', ')})`).join('; ')}.`] : []),
    ...(unavailable.length ? [`Not available to this key: ${unavailable.join(', ')}.`] : []),
  ].join(' ');
  return { summaries, full, byScope, unavailable };
}

/**
 * The first of the summaries that fits the line: the next one while the text overflows, from the first again when the
 * line's width changes (the navigation spans the window on narrow screens). Keyed by the summaries.
 */
function FittedSummary({ summaries, title }: { summaries: string[]; title: string }) {
  const [at, setAt] = useState(0);
  const ref = useRef<HTMLElement>(null);
  const width = useRef(0);
  useEffect(() => {
    const again = () => {
      if (ref.current && ref.current.clientWidth !== width.current) setAt(0);
    };
    window.addEventListener('resize', again);
    return () => window.removeEventListener('resize', again);
  }, []);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    width.current = el.clientWidth;
    if (el.scrollWidth > el.clientWidth && at < summaries.length - 1) setAt(at + 1);
  });
  return html`<summary ref=${ref} title=${title}>${summaries[Math.min(at, summaries.length - 1)]}</summary>`;
}

/** Up and Down move between the navigation's links (Tab still walks them too); Home and End jump to the ends. */
function onNavKey(e: KeyboardEvent) {
  if (!['ArrowDown', 'ArrowUp', 'Home', 'End'].includes(e.key)) return;
  const links = [...(e.currentTarget as HTMLElement).querySelectorAll<HTMLAnchorElement>('a[href]')];
  const at = links.indexOf(document.activeElement as HTMLAnchorElement);
  if (at < 0) return;
  e.preventDefault();
  const to = e.key === 'Home' ? 0 : e.key === 'End' ? links.length - 1 : (at + (e.key === 'ArrowDown' ? 1 : -1) + links.length) % links.length;
  links[to]!.focus();
}

export function SideNav({ screens, current, hidden }: { screens: Screen[]; current: Screen; hidden: HiddenScreen[] }) {
  const more = moreScreens(hidden);
  return html`<nav class="side" aria-label="Screens" onKeyDown=${onNavKey}>
    ${AREAS.map((area) => {
      const mine = screens.filter((s) => s.area === area);
      if (mine.length === 0) return null;
      const id = `nav-${area.toLowerCase()}`;
      return html`<div class="nav-group">
        <h2 id=${id}>${area}</h2>
        <ul aria-labelledby=${id}>${mine.map((s) => html`<li>
          <a href=${`#/${s.path}`} aria-current=${s === current ? 'page' : undefined}>${s.title}</a>
        </li>`)}</ul>
      </div>`;
    })}
    ${more
      ? html`<details class="more-scopes" data-testid="more-scopes">
          <${FittedSummary} key=${more.summaries.join('\n')} summaries=${more.summaries} title=${more.full} />
          <ul aria-label="Screens other scopes would show">
            ${more.byScope.map((g) => html`<li><code>${g.scope}</code>: ${g.titles.join(', ')}</li>`)}
            ${more.unavailable.length ? html`<li>Not available to this key: ${more.unavailable.join(', ')}</li>` : null}
          </ul>
        </details>`
      : null}
  </nav>`;
}

interface ProjectOption {
  id: string;
  name: string;
}

const PROJECT_OPTIONS = `query ProjectOptions { projects(first: 100) { edges { node { id name } } } }`;

/** A long project name is cut so that the id after it stays in view in the top bar (the option's title has both). */
const shortName = (name: string): string => (name.length > 28 ? `${name.slice(0, 27)}…` : name);

/**
 * Which project the console looks at. Project keys have one (shown, not switchable); the operator and SSO operators
 * with several projects pick from the first 100 here, or from the full, filterable list ("All projects…").
 */
export function ProjectSwitcher({ projectId, switchable, onSwitch }: { projectId: string | null; switchable: boolean; onSwitch: (id: string | null) => void }) {
  // Read again when the project changes: a project just created from the list is then named here too.
  const q = useQuery(() => gql<{ projects: { edges: { node: ProjectOption }[] } }>(PROJECT_OPTIONS), [projectId]);
  const options = q.data?.projects.edges.map((e) => e.node) ?? [];
  const current = options.find((p) => p.id === projectId);
  if (!switchable) {
    return html`<span class="project-name" data-testid="project-name" title=${current ? `${current.name} (${current.id})` : undefined}>${current ? html`<strong>${current.name}</strong> ` : null}<code>${projectId ?? ''}</code></span>`;
  }
  return html`<label class="project-switcher">
    <span class="sr-only">Project</span>
    <select aria-label="Project" title=${current ? `${current.name} (${current.id})` : projectId ?? ''} value=${projectId ?? ''} onChange=${(e: Event) => {
      const v = (e.target as HTMLSelectElement).value;
      onSwitch(v === '' ? null : v);
    }}>
      ${projectId && !current ? html`<option value=${projectId}>${projectId}</option>` : null}
      ${options.map((p) => html`<option value=${p.id} title=${`${p.name} (${p.id})`}>${shortName(p.name)} (${p.id})</option>`)}
      <option value="">All projects…</option>
    </select>
  </label>`;
}

export function ThemeToggle({ theme, onToggle }: { theme: Theme; onToggle: () => void }) {
  const next = theme === 'dark' ? 'light' : 'dark';
  return html`<button type="button" class="theme-toggle" aria-label=${`Use the ${next} theme`} aria-pressed=${theme === 'dark'} title=${`Use the ${next} theme`} onClick=${onToggle}>
    ${theme === 'dark' ? '☀ Light' : '☾ Dark'}
  </button>`;
}

export function Shell({ top, nav, children }: { top: ComponentChildren; nav: ComponentChildren; children: ComponentChildren }) {
  // A button, not an anchor: the hash is the route.
  return html`<button type="button" class="skip" onClick=${() => document.getElementById('main')?.focus()}>Skip to the screen</button>
    ${top}
    <div class="shell">
      ${nav}
      <main id="main" tabindex="-1">${children}</main>
    </div>`;
}
