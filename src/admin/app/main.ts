import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { auth, gql } from './api.ts';
import { CATALOG, scopesFor, type Catalog } from './catalog.ts';
import { session, sso } from './session.ts';
import { Card, ErrorBox, Pager, Status, fmtTime, html, usePager, useQuery } from './ui.ts';
import { SCREENS, type Screen } from './nav.ts';
import { ProjectSwitcher, Shell, SideNav, ThemeToggle, type HiddenScreen } from './layout.ts';
import { applyTheme, useTheme } from './theme.ts';
import type { Viewer } from './viewer.ts';
import { VIEWER } from './viewer.ts';

/** The product's mark and name: the sign-in page and the top bar. */
function Brand({ tag }: { tag: 'h1' | 'div' }) {
  const name = html`<img src=${`${import.meta.env.BASE_URL}favicon.svg`} alt="" width="28" height="28" /><span>svc gateway</span> <small>Admin console</small>`;
  return tag === 'h1' ? html`<h1 class="brand">${name}</h1>` : html`<div class="brand">${name}</div>`;
}

/** An operator signed in by OIDC or SAML (GET /auth/session). */
interface SsoSession {
  id: string;
  operator: { id: string; user_name: string };
  method: string;
  csrf_token: string;
  projects: { project_id: string; role: string }[];
}

/** Why the gateway sent the browser back from a sign-in without a session (/admin/?signin_error=…). */
const SIGN_IN_ERRORS: Record<string, string> = {
  not_allowed: 'The identity provider knows you, but this gateway has no active operator of that name (operators are provisioned by SCIM).',
  invalid_assertion: "The identity provider's answer was refused: its signature or validity did not check out.",
  invalid_response: "The identity provider's answer was refused.",
  expired: 'The sign-in took too long or started in another browser: try again.',
  ip_not_allowed: 'This address is not allowed to use the console.',
};

function readSignInError(): string | null {
  const code = new URLSearchParams(location.search).get('signin_error');
  if (code === null) return null;
  history.replaceState(null, '', location.pathname + location.hash);
  return SIGN_IN_ERRORS[code] ?? `The sign-in was refused (${code}).`;
}

function SsoButtons({ methods }: { methods: string[] }) {
  if (!methods.includes('oidc') && !methods.includes('saml')) return null;
  return html`<div class="sso">
    ${methods.includes('oidc') ? html`<p><a class="button primary" href="/auth/oidc/start">Sign in with OpenID Connect</a></p>` : null}
    ${methods.includes('saml') ? html`<p><a class="button primary" href="/auth/saml/login">Sign in with SAML</a></p>` : null}
    <p class="muted">Operators sign in through the organisation's identity provider; the session is kept by the gateway.</p>
  </div>`;
}

function SignIn({ onSignIn, error, methods, notice }: { onSignIn: (key: string) => void; error: unknown; methods: string[]; notice: string | null }) {
  const [key, setKey] = useState('');
  return html`<main class="signin">
    <${Brand} tag="h1" />
    <p class="muted tagline">Project keys, limits, budgets, webhooks and the audit log of your inference gateway.</p>
    ${notice ? html`<div class="error" role="alert" data-testid="signin-notice"><strong>${notice}</strong></div>` : null}
    <section class="card">
      <h2>Sign in</h2>
      <${SsoButtons} methods=${methods} />
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

function ProjectPicker({ onPick, kind }: { onPick: (id: string) => void; kind: Viewer['kind'] }) {
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
      <p class="muted">${kind === 'session'
        ? "Your groups give you these projects (a viewer reads, an admin acts). Open one to see its keys, limits, webhooks and audit log."
        : 'The operator key sees every project. Open one to manage its keys, limits, webhooks and audit log.'}</p>
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
      ${q.data && rows.length === 0 ? html`<p class="empty">${all.length === 0 ? (kind === 'session' ? 'Your groups give you no project yet.' : 'No projects yet: create the first one below.') : `No project on this page matches “${filter}”.`}</p>` : null}
      <p class="muted">${needle ? `${rows.length} of ${all.length} on this page match.` : null}</p>
      <${Pager} pager=${pager} hasNext=${q.data?.projects.pageInfo.hasNextPage ?? false} endCursor=${q.data?.projects.pageInfo.endCursor ?? null} />
    <//>
    ${kind === 'operator'
      ? html`<${Card} title="Create a project">
      <${CreateProjectForm} onCreated=${onPick} />
    <//>`
      : null}`;
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
  // The gateway's scopes, event types and actions: read once, after the first sign-in (the same for every caller).
  const [catalog, setCatalog] = useState<Catalog | null>(null);
  const [catalogError, setCatalogError] = useState<unknown>(null);
  const [error, setError] = useState<unknown>(null);
  const [project, setProject] = useState(session.project());
  const route = useHashRoute();
  // Operators signed in by OIDC or SAML (issue 22): the gateway's session, found by GET /auth/session at load.
  const [ssoSession, setSsoSession] = useState<SsoSession | null>(null);
  const [ssoChecked, setSsoChecked] = useState(false);
  const [methods, setMethods] = useState<string[]>(['api_key']);
  const [notice, setNotice] = useState<string | null>(readSignInError);
  const [theme, toggleTheme] = useTheme();

  useEffect(() => {
    if (key) return;
    // The session is asked for only where a sign-in other than the API key is configured (no 401 in a console
    // that has none).
    auth<{ methods: string[] }>('/auth/methods')
      .then((m) => {
        setMethods(m.methods);
        if (!m.methods.some((method) => method !== 'api_key')) return;
        return auth<SsoSession>('/auth/session')
          .then((s) => {
            sso.setCsrf(s.csrf_token);
            // A project remembered by this tab from another sign-in may not be one of this operator's.
            if (!s.projects.some((p) => p.project_id === session.project())) {
              session.setProject(null);
              setProject(null);
            }
            setSsoSession(s);
          })
          .catch(() => undefined);
      })
      .catch((err) => setError(err))
      .finally(() => setSsoChecked(true));
  }, [key]);

  useEffect(() => {
    const ended = (e: Event) => {
      sso.setCsrf(null);
      session.setProject(null);
      setSsoSession(null);
      setViewer(null);
      setProject(null);
      setNotice(String((e as CustomEvent).detail ?? 'The console session ended: sign in again.'));
    };
    addEventListener('svc:session-ended', ended);
    return () => removeEventListener('svc:session-ended', ended);
  }, []);

  useEffect(() => {
    if (!key && !ssoSession) return;
    gql<{ viewer: Viewer }>(VIEWER)
      .then((d) => setViewer(d.viewer))
      .catch((err) => {
        session.clear();
        setKey(null);
        setError(err);
      });
  }, [key, ssoSession]);

  useEffect(() => {
    if (!viewer || catalog) return;
    setCatalogError(null);
    gql<{ catalog: Catalog }>(CATALOG)
      .then((d) => setCatalog(d.catalog))
      .catch((err) => setCatalogError(err));
  }, [viewer, catalog]);

  if (!key && !ssoSession) {
    if (!ssoChecked) return html`<p class="loading">Checking for a session…</p>`;
    return html`<${SignIn} error=${error} methods=${methods} notice=${notice}
      onSignIn=${(k: string) => { session.setKey(k); setError(null); setNotice(null); setKey(k); }} />`;
  }
  if (!viewer || (!catalog && !catalogError)) return html`<p class="loading">Checking the key…</p>`;

  const signOut = async () => {
    if (ssoSession) {
      try {
        await auth('/auth/sign-out', { method: 'POST' });
      } catch {
        // Already ended: the page forgets it all the same.
      }
      sso.setCsrf(null);
      setSsoSession(null);
      setNotice('You signed out.');
    }
    session.clear();
    setViewer(null);
    setKey(null);
    setProject(null);
  };
  const projectId = viewer.projectId ?? project;
  // The scopes a screen needs, any one (Approvals: governance:manage or risk:approve); [] any key; null: none.
  const needs = (s: Screen) => (s.actions.length === 0 ? [] : catalog ? scopesFor(catalog, s.actions) : null);
  const allowed = (s: Screen) => {
    const scopes = needs(s);
    return scopes !== null && (scopes.length === 0 || scopes.some((scope) => viewer.scopes.includes(scope)));
  };
  const shown = SCREENS.filter(allowed);
  const hidden: HiddenScreen[] = SCREENS.filter((s) => !allowed(s)).map((s) => ({ screen: s, scopes: needs(s) ?? [] }));
  const screen = shown.find((s) => s.path === route) ?? shown[0] ?? SCREENS[0]!;
  const switchable = viewer.kind === 'operator' || (ssoSession !== null && ssoSession.projects.length > 1);
  const switchProject = (id: string | null) => {
    session.setProject(id);
    setProject(id);
  };

  const top = html`<header class="top">
      <${Brand} tag="div" />
      ${projectId ? html`<${ProjectSwitcher} projectId=${projectId} switchable=${switchable} onSwitch=${switchProject} />` : null}
      <span class="who" title=${ssoSession ? ssoSession.operator.user_name : viewer.keyId}>${ssoSession
        ? html`operator <code>${ssoSession.operator.user_name}</code>`
        : html`key <code>${viewer.keyId}</code>`}</span>
      <${ThemeToggle} theme=${theme} onToggle=${toggleTheme} />
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>`;
  const nav = html`<${SideNav} screens=${shown} current=${screen} hidden=${hidden} />`;
  // An unknown route, or one this key cannot use, shows the first screen it can (hidden screens are not linked).
  const unknownRoute = route !== screen.path && SCREENS.some((s) => s.path === route);

  return html`<${Shell} top=${top} nav=${nav}>
      ${!catalog
        ? html`<section class="card"><h1 class="screen-title">${screen.title}</h1><${ErrorBox} error=${catalogError} /></section>`
        : !projectId
        ? html`<${ProjectPicker} kind=${viewer.kind} onPick=${switchProject} />`
        : html`${unknownRoute ? html`<p class="notice" role="status">That screen needs a scope this key does not hold.</p>` : null}
          <h1 class="screen-title">${screen.title}</h1>
          <${screen.view} key=${`${projectId}/${screen.path}`} viewer=${viewer} projectId=${projectId} catalog=${catalog} />`}
    <//>`;
}

applyTheme();
const root = document.getElementById('app')!;
root.textContent = ''; // the static "Loading…" placeholder
render(html`<${App} />`, root);
