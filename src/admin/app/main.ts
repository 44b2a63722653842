import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { gql } from './api.ts';
import { session } from './session.ts';
import { ErrorBox, html, useQuery } from './ui.ts';
import { AuditScreen } from './screens/audit.ts';
import { KeysScreen } from './screens/keys.ts';
import { LimitsScreen } from './screens/limits.ts';
import { OverviewScreen } from './screens/overview.ts';
import { WebhooksScreen } from './screens/webhooks.ts';

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
];

const VIEWER = `query Viewer { viewer { kind keyId projectId scopes } }`;

function SignIn({ onSignIn, error }: { onSignIn: (key: string) => void; error: unknown }) {
  const [key, setKey] = useState('');
  return html`<main class="signin">
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

function ProjectPicker({ onPick }: { onPick: (id: string) => void }) {
  const q = useQuery(() => gql<{ projects: { edges: { node: { id: string; name: string; status: string } }[] } }>(
    `query Projects { projects(first: 100) { edges { node { id name status } } } }`,
  ), []);
  return html`<section class="card"><h2>Choose a project</h2>
    <p class="muted">The operator key sees every project.</p>
    <${ErrorBox} error=${q.error} />
    <ul>${q.data?.projects.edges.map(({ node }) => html`<li><button type="button" onClick=${() => onPick(node.id)}>${node.name}</button> <code>${node.id}</code> <span class="muted">${node.status}</span></li>`)}</ul>
  </section>`;
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
  const allowed = (s: Screen) => s.scope === null || viewer.scopes.includes(s.scope);

  return html`
    <header class="top">
      <h1>svc gateway · admin</h1>
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
