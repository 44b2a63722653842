import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { gql } from './api.ts';
import { session } from './session.ts';
import { Card, ErrorBox, Pager, Status, fmtTime, html, usePager, useQuery } from './ui.ts';
import { AuditScreen } from './screens/audit.ts';
import { KeysScreen } from './screens/keys.ts';
import { LimitsScreen } from './screens/limits.ts';
import { OverviewScreen } from './screens/overview.ts';
import { WebhooksScreen } from './screens/webhooks.ts';
import { ApprovalsScreen } from './screens/approvals.ts';

export interface Viewer {
  kind: 'operator' | 'key';
  keyId: string;
  projectId: string | null;
  scopes: string[];
}

interface Screen {
  path: string;
  title: string;
  /** The scope the screen needs; null: any key. */
  scope: string | null;
  view: (props: { viewer: Viewer; projectId: string }) => unknown;
}

const SCREENS: Screen[] = [
  { path: 'overview', title: 'Overview', scope: null, view: OverviewScreen },
  { path: 'keys', title: 'Keys', scope: 'keys:manage', view: KeysScreen },
  { path: 'webhooks', title: 'Webhooks', scope: 'governance:manage', view: WebhooksScreen },
  { path: 'limits', title: 'Rate limits', scope: 'governance:manage', view: LimitsScreen },
  { path: 'audit', title: 'Audit log', scope: 'audit:read', view: AuditScreen },
  { path: 'approvals', title: 'Approvals', scope: 'governance:manage or risk:approve', view: ApprovalsScreen },
];

const VIEWER = `query Viewer { viewer { kind keyId projectId scopes } }`;

/** The product's mark and name: the sign-in page and the top bar. */
function Brand({ tag }: { tag: 'h1' | 'div' }) {
  const name = html`<img src=${`${import.meta.env.BASE_URL}favicon.svg`} alt="" width="28" height="28" /><span>svc gateway</span> <small>Admin console</small>`;
  return tag === 'h1' ? html`<h1 class="brand">${name}</h1>` : html`<div class="brand">${name}</div>`;
}

function SignIn({ onSignIn, error }: { onSignIn: (key: string) => void; error: unknown }) {
  const [key, setKey] = useState('');
  return html`<main class="signin">
    <${Brand} tag="h1" />
    <p class="muted tagline">Project keys, limits, budgets, webhooks and the audit log of your inference gateway.</p>
    <section class="card">
      <h2>Sign in</h2>
      <p class="muted">Enter an API key (<code>svc_sk_…</code>). The console can do exactly what the key's scopes allow.
        The key is kept in this tab's session storage only.</p>
      <form onSubmit=${(e: Event) => { e.preventDefault(); onSignIn(key.trim()); }}>
        <label>API key
          <input type="password" name="key" autocomplete="off" value=${key} onInput=${(e: Event) => setKey((e.target as HTMLInputElement).value)} required />
        </label>
        <p><button class="primary" type="submit">Sign in</button></p>
      </form>
      <${ErrorBox} error=${error} />
    </section>
  </main>`;
}

interface ProjectRow {
  id: string;
  name: string;
  plan: string;
  region: string | null;
  status: string;
  createdAt: number;
}

const PROJECTS = `query Projects($after: String) {
  projects(first: 100, after: $after) { edges { node { id name plan region status createdAt } } pageInfo { hasNextPage endCursor } }
}`;
const CREATE_PROJECT = `mutation CreateProject($input: CreateProjectInput!) { createProject(input: $input) { id name } }`;

/** The operator's project: create one, or pick one from a filterable table. */
function CreateProjectForm({ onCreated }: { onCreated: (id: string) => void }) {
  const [name, setName] = useState('');
  const [plan, setPlan] = useState('starter');
  const [region, setRegion] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      const r = await gql<{ createProject: { id: string } }>(CREATE_PROJECT, { input: { name: name.trim(), plan, region: region.trim() || null } });
      setError(null);
      onCreated(r.createProject.id);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="inline" onSubmit=${submit} aria-label="Create a project">
    <label>Name <input name="name" required maxlength="100" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} /></label>
    <label>Plan <select name="plan" value=${plan} onChange=${(e: Event) => setPlan((e.target as HTMLSelectElement).value)}>
      <option value="starter">starter (60 req/min)</option><option value="growth">growth (300 req/min)</option><option value="enterprise">enterprise</option>
    </select></label>
    <label>Region (optional) <input name="region" placeholder="eu-west-1" value=${region} onInput=${(e: Event) => setRegion((e.target as HTMLInputElement).value)} /></label>
    <button class="primary" type="submit" disabled=${busy}>Create project</button>
  </form>
  <${ErrorBox} error=${error} />`;
}

function ProjectPicker({ onPick }: { onPick: (id: string) => void }) {
  const pager = usePager();
  const [filter, setFilter] = useState('');
  const q = useQuery(
    () => gql<{ projects: { edges: { node: ProjectRow }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(PROJECTS, { after: pager.after }),
    [pager.after],
  );
  const all = q.data?.projects.edges.map((e) => e.node) ?? [];
  const needle = filter.trim().toLowerCase();
  const rows = needle ? all.filter((p) => `${p.name} ${p.id} ${p.plan} ${p.status} ${p.region ?? ''}`.toLowerCase().includes(needle)) : all;
  return html`
    <${Card} title="Choose a project">
      <p class="muted">The operator key sees every project. Open one to manage its keys, limits, webhooks and audit log.</p>
      <label class="filter">Filter <input type="search" name="filter" placeholder="name, id, plan or status" value=${filter}
        onInput=${(e: Event) => setFilter((e.target as HTMLInputElement).value)} /></label>
      <${ErrorBox} error=${q.error} />
      <table class="projects">
        <thead><tr><th>Name</th><th>Project id</th><th>Plan</th><th>Status</th><th>Region</th><th>Created</th><th></th></tr></thead>
        <tbody>${rows.map((p) => html`<tr data-project-id=${p.id}>
          <td><strong>${p.name}</strong></td><td class="mono">${p.id}</td><td>${p.plan}</td><td><${Status} value=${p.status} /></td>
          <td>${p.region ?? 'any'}</td><td>${fmtTime(p.createdAt)}</td>
          <td><button type="button" aria-label=${`Open ${p.name}`} onClick=${() => onPick(p.id)}>Open</button></td>
        </tr>`)}</tbody>
      </table>
      ${q.data && rows.length === 0 ? html`<p class="empty">${all.length === 0 ? 'No projects yet: create the first one below.' : `No project on this page matches “${filter}”.`}</p>` : null}
      <p class="muted">${needle ? `${rows.length} of ${all.length} on this page match.` : null}</p>
      <${Pager} pager=${pager} hasNext=${q.data?.projects.pageInfo.hasNextPage ?? false} endCursor=${q.data?.projects.pageInfo.endCursor ?? null} />
    <//>
    <${Card} title="Create a project">
      <${CreateProjectForm} onCreated=${onPick} />
    <//>`;
}

function useHashRoute(): string {
  const read = () => location.hash.replace(/^#\/?/, '') || 'overview';
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

function App() {
  const [key, setKey] = useState(session.key());
  const [viewer, setViewer] = useState<Viewer | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [project, setProject] = useState(session.project());
  const route = useHashRoute();

  useEffect(() => {
    if (!key) return;
    gql<{ viewer: Viewer }>(VIEWER)
      .then((d) => setViewer(d.viewer))
      .catch((err) => {
        session.clear();
        setKey(null);
        setError(err);
      });
  }, [key]);

  if (!key) return html`<${SignIn} error=${error} onSignIn=${(k: string) => { session.setKey(k); setError(null); setKey(k); }} />`;
  if (!viewer) return html`<p class="loading">Checking the key…</p>`;

  const signOut = () => {
    session.clear();
    setViewer(null);
    setKey(null);
    setProject(null);
  };
  const projectId = viewer.projectId ?? project;
  const screen = SCREENS.find((s) => s.path === route) ?? SCREENS[0]!;
  // A scope may read "a or b" (Approvals: governance:manage or risk:approve).
  const allowed = (s: Screen) => s.scope === null || s.scope.split(' or ').some((scope) => viewer.scopes.includes(scope));

  return html`
    <header class="top">
      <${Brand} tag="h1" />
      <span class="who">key <code>${viewer.keyId}</code>${projectId ? html` · project <code>${projectId}</code>` : null}</span>
      ${viewer.kind === 'operator' && projectId ? html`<button type="button" onClick=${() => { session.setProject(null); setProject(null); }}>Switch project</button>` : null}
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <nav class="tabs" aria-label="Screens">
      ${SCREENS.map((s) =>
        allowed(s)
          ? html`<a href=${`#/${s.path}`} aria-current=${s === screen ? 'page' : undefined}>${s.title}</a>`
          : html`<span class="disabled" aria-disabled="true" title=${`Needs the ${s.scope} scope`}>${s.title} <small>(needs ${s.scope})</small></span>`,
      )}
    </nav>
    <main>
      ${!projectId
        ? html`<${ProjectPicker} onPick=${(id: string) => { session.setProject(id); setProject(id); }} />`
        : allowed(screen)
          ? html`<${screen.view} viewer=${viewer} projectId=${projectId} />`
          : html`<section class="card"><h2>${screen.title}</h2><p>This screen needs the <code>${screen.scope}</code> scope, which this key does not hold.</p></section>`}
    </main>`;
}

const root = document.getElementById('app')!;
root.textContent = ''; // the static "Loading…" placeholder
render(html`<${App} />`, root);
