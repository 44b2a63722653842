import type { ComponentChildren } from 'preact';
import { gql } from './api.ts';
import { AREAS, type Screen } from './nav.ts';
import type { Theme } from './theme.ts';
import { html, useQuery } from './ui.ts';

/** A screen the caller cannot use, and the scopes (any one) that would show it. */
export interface HiddenScreen {
  screen: Screen;
  scopes: string[];
}

/**
 * "Scopes a, b would show more: X, Y." One line for every screen the caller's scopes leave out; the scopes are named
 * once each, with the screens they would show.
 */
export function moreLine(hidden: HiddenScreen[]): string | null {
  if (hidden.length === 0) return null;
  const scopes = [...new Set(hidden.map((h) => h.scopes[0]).filter((s): s is string => Boolean(s)))];
  const titles = hidden.map((h) => h.screen.title).join(', ');
  return scopes.length > 0 ? `${scopes.join(', ')} would show more: ${titles}.` : `Not available to this key: ${titles}.`;
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
  const more = moreLine(hidden);
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
    ${more ? html`<p class="more-scopes" data-testid="more-scopes">${more}</p>` : null}
  </nav>`;
}

interface ProjectOption {
  id: string;
  name: string;
}

const PROJECT_OPTIONS = `query ProjectOptions { projects(first: 100) { edges { node { id name } } } }`;

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
    return html`<span class="project-name" data-testid="project-name">${current ? html`<strong>${current.name}</strong> ` : null}<code>${projectId ?? ''}</code></span>`;
  }
  return html`<label class="project-switcher">
    <span class="sr-only">Project</span>
    <select aria-label="Project" value=${projectId ?? ''} onChange=${(e: Event) => {
      const v = (e.target as HTMLSelectElement).value;
      onSwitch(v === '' ? null : v);
    }}>
      ${projectId && !current ? html`<option value=${projectId}>${projectId}</option>` : null}
      ${options.map((p) => html`<option value=${p.id}>${p.name} (${p.id})</option>`)}
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
