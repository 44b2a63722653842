import { useState } from 'preact/hooks';
import { ApiError, auth, gql } from '../api.ts';
import { SidePanel } from '../panel.ts';
import { Card, ErrorBox, Status, fmtTime, html, useQuery } from '../ui.ts';
import type { ScreenProps } from '../viewer.ts';

/**
 * SSO and operators (issue 42, CONTRACT §17): the people SCIM provisioned, their groups and roles per project, how and
 * when they last signed in; the sign-in configuration, read-only and without a secret; the groups' roles and the
 * project's console IP allowlist, changed in the side panel. The people and the identity provider are the operator
 * key's (GraphQL operators, signInSettings, operatorGroups); a key with governance:manage sees the project's allowlist.
 */

interface ProjectRole {
  projectId: string;
  role: string;
}
interface Operator {
  id: string;
  userName: string;
  displayName: string | null;
  email: string | null;
  externalId: string | null;
  active: boolean;
  groups: { id: string; displayName: string }[];
  roles: ProjectRole[];
  lastSignIn: { at: number; method: string | null } | null;
}
interface Group {
  id: string;
  displayName: string;
  externalId: string | null;
  members: string[];
  roles: ProjectRole[];
}
interface Settings {
  oidc: { issuer: string; clientId: string; usernameClaim: string; scopes: string; redirectUri: string } | null;
  saml: { entryPoint: string; entityId: string; acsUrl: string; metadataUrl: string } | null;
  scim: { baseUrl: string } | null;
  consoleIpAllowlist: string[];
  idleTimeoutS: number;
  absoluteTimeoutS: number;
}
interface Methods {
  methods: string[];
  idle_timeout_s: number;
  absolute_timeout_s: number;
}

const DIRECTORY = `query Operators {
  operators { id userName displayName email externalId active groups { id displayName } roles { projectId role } lastSignIn { at method } }
  operatorGroups { id displayName externalId members roles { projectId role } }
  signInSettings { oidc { issuer clientId usernameClaim scopes redirectUri } saml { entryPoint entityId acsUrl metadataUrl } scim { baseUrl } consoleIpAllowlist idleTimeoutS absoluteTimeoutS }
  projects(first: 100) { edges { node { id name } } }
}`;
const SET_ROLES = `mutation SetRoles($groupId: ID!, $roles: [OperatorGroupRoleInput!]!) {
  setOperatorGroupRoles(groupId: $groupId, roles: $roles) { id roles { projectId role } }
}`;
const ALLOWLIST = `query Allowlist($projectId: ID!) { projectIpAllowlist(projectId: $projectId) { cidrs updatedAt } }`;
const SET_ALLOWLIST = `mutation SetAllowlist($projectId: ID!, $cidrs: [String!]!) { setProjectIpAllowlist(projectId: $projectId, cidrs: $cidrs) { cidrs updatedAt } }`;

const METHOD_NAMES: Record<string, string> = { oidc: 'OpenID Connect', saml: 'SAML 2.0', api_key: 'API key' };
const duration = (s: number) => (s % 3600 === 0 ? `${s / 3600} h` : s % 60 === 0 ? `${s / 60} min` : `${s} s`);
const value = (e: Event) => (e.target as HTMLInputElement).value;

function RoleList({ roles, names, projectId }: { roles: ProjectRole[]; names: Map<string, string>; projectId: string }) {
  if (roles.length === 0) return html`<span class="muted">no project</span>`;
  return html`<ul class="roles">${roles.map((r) => html`<li class=${r.projectId === projectId ? 'current' : ''}>
    <span>${names.get(r.projectId) ?? r.projectId}</span> <span class=${`role ${r.role}`}>${r.role}</span></li>`)}</ul>`;
}

function OperatorsTable({ operators, names, projectId }: { operators: Operator[]; names: Map<string, string>; projectId: string }) {
  const [filter, setFilter] = useState('');
  const needle = filter.trim().toLowerCase();
  const rows = needle
    ? operators.filter((o) => `${o.userName} ${o.displayName ?? ''} ${o.email ?? ''} ${o.groups.map((g) => g.displayName).join(' ')}`.toLowerCase().includes(needle))
    : operators;
  if (operators.length === 0) {
    return html`<p class="empty">No operator yet. Operators are provisioned by the identity provider through SCIM
      (<code>POST /scim/v2/Users</code>); only a provisioned, active operator can sign in by SSO.</p>`;
  }
  return html`<label class="filter">Filter <input type="search" name="operator-filter" placeholder="name, e-mail or group" value=${filter}
      onInput=${(e: Event) => setFilter(value(e))} /></label>
    <div class="table-scroll"><table aria-label="Operators" class="operators">
      <thead><tr><th>Operator</th><th>Status</th><th>Groups</th><th>Roles per project</th><th>Last sign-in</th></tr></thead>
      <tbody>${rows.map((o) => html`<tr data-operator-id=${o.id}>
        <td><strong>${o.displayName ?? o.userName}</strong>${o.displayName ? html`<div>${o.userName}</div>` : null}
          <div class="mono muted">${o.id}</div></td>
        <td><${Status} value=${o.active ? 'active' : 'deprovisioned'} /></td>
        <td>${o.groups.length === 0 ? html`<span class="muted">none</span>` : o.groups.map((g) => g.displayName).join(', ')}</td>
        <td><${RoleList} roles=${o.roles} names=${names} projectId=${projectId} /></td>
        <td>${o.lastSignIn ? html`${fmtTime(o.lastSignIn.at)}<div class="muted">${METHOD_NAMES[o.lastSignIn.method ?? ''] ?? 'SSO'}</div>` : html`<span class="muted">never</span>`}</td>
      </tr>`)}</tbody>
    </table></div>
    ${rows.length === 0 ? html`<p class="empty">No operator matches “${filter}”.</p>` : null}`;
}

/** The side panel: a group's whole role list (PUT /v1/operator-groups/{id}/roles, GraphQL setOperatorGroupRoles). */
function EditRoles({ group, projects, onSaved }: { group: Group; projects: { id: string; name: string }[]; onSaved: (g: string) => void }) {
  const [rows, setRows] = useState<ProjectRole[]>(group.roles.map((r) => ({ ...r })));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const unused = projects.filter((p) => !rows.some((r) => r.projectId === p.id));
  const set = (i: number, patch: Partial<ProjectRole>) => setRows(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  const param = error instanceof ApiError ? error.param : null;
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      await gql(SET_ROLES, { groupId: group.id, roles: rows });
      setError(null);
      onSaved(group.displayName);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="roles-edit" onSubmit=${submit} aria-label=${`Roles of ${group.displayName}`}>
    <p class="muted">Group <code>${group.id}</code>, ${group.members.length} member${group.members.length === 1 ? '' : 's'}. A <strong>viewer</strong> reads;
      an <strong>admin</strong> acts with every scope in the project. The list replaces the group's roles; its members'
      next request uses them.</p>
    ${rows.length === 0 ? html`<p class="empty">No project: the group's members reach nothing.</p>` : null}
    <table aria-label="Roles"><thead><tr><th>Project</th><th>Role</th><th></th></tr></thead>
      <tbody>${rows.map((r, i) => html`<tr>
        <td><select aria-label=${`Project of row ${i + 1}`} aria-invalid=${param === `roles[${i}].project_id` ? 'true' : 'false'} value=${r.projectId}
          onChange=${(e: Event) => set(i, { projectId: value(e) })}>
          ${[...projects.filter((p) => p.id === r.projectId), ...unused].map((p) => html`<option value=${p.id}>${p.name} (${p.id})</option>`)}
          ${projects.some((p) => p.id === r.projectId) ? null : html`<option value=${r.projectId}>${r.projectId}</option>`}
        </select></td>
        <td><select aria-label=${`Role in row ${i + 1}`} value=${r.role} onChange=${(e: Event) => set(i, { role: value(e) })}>
          <option value="viewer">viewer</option><option value="admin">admin</option></select></td>
        <td><button type="button" class="danger" aria-label=${`Remove row ${i + 1}`} onClick=${() => setRows(rows.filter((_, j) => j !== i))}>Remove</button></td>
      </tr>`)}</tbody></table>
    <p class="actions">
      <button type="button" disabled=${unused.length === 0} onClick=${() => setRows([...rows, { projectId: unused[0]!.id, role: 'viewer' }])}>Add a project</button>
      <button class="primary" type="submit" disabled=${busy}>Save roles</button>
    </p>
    <${ErrorBox} error=${error} />
  </form>`;
}

function GroupsTable({ groups, operators, names, projectId, onEdit }: {
  groups: Group[];
  operators: Operator[];
  names: Map<string, string>;
  projectId: string;
  onEdit: (g: Group) => void;
}) {
  const who = new Map(operators.map((o) => [o.id, o.userName]));
  if (groups.length === 0) return html`<p class="empty">No group yet. The identity provider pushes groups through SCIM (<code>POST /scim/v2/Groups</code>); a group's role per project is set here.</p>`;
  return html`<div class="table-scroll"><table aria-label="Groups" class="operator-groups">
    <thead><tr><th>Group</th><th>Members</th><th>Roles per project</th><th></th></tr></thead>
    <tbody>${groups.map((g) => html`<tr data-group-id=${g.id}>
      <td><strong>${g.displayName}</strong><div class="mono muted">${g.id}</div></td>
      <td>${g.members.length === 0 ? html`<span class="muted">none</span>` : g.members.map((m) => who.get(m) ?? m).join(', ')}</td>
      <td><${RoleList} roles=${g.roles} names=${names} projectId=${projectId} /></td>
      <td><button type="button" aria-label=${`Edit roles of ${g.displayName}`} onClick=${() => onEdit(g)}>Edit roles</button></td>
    </tr>`)}</tbody>
  </table></div>`;
}

function SignInSettings({ s }: { s: Settings }) {
  return html`<div class="grid sign-in">
    <div class="stat"><h3>OpenID Connect</h3>${s.oidc
      ? html`<dl><dt>Issuer</dt><dd class="mono">${s.oidc.issuer}</dd><dt>Client id</dt><dd class="mono">${s.oidc.clientId}</dd>
          <dt>User name claim</dt><dd><code>${s.oidc.usernameClaim}</code></dd><dt>Redirect URI</dt><dd class="mono">${s.oidc.redirectUri}</dd></dl>`
      : html`<p class="muted">Off (<code>SVC_OIDC_ISSUER</code> unset).</p>`}</div>
    <div class="stat"><h3>SAML 2.0</h3>${s.saml
      ? html`<dl><dt>IdP sign-in URL</dt><dd class="mono">${s.saml.entryPoint}</dd><dt>Our entity id</dt><dd class="mono">${s.saml.entityId}</dd>
          <dt>ACS</dt><dd class="mono">${s.saml.acsUrl}</dd><dt>Metadata</dt><dd><a href=${s.saml.metadataUrl}>SP metadata (XML)</a></dd></dl>`
      : html`<p class="muted">Off (<code>SVC_SAML_ENTRY_POINT</code> unset).</p>`}</div>
    <div class="stat"><h3>SCIM provisioning</h3>${s.scim
      ? html`<p><${Status} value="active" /> Base URL <code>${s.scim.baseUrl}</code></p><p class="muted">The identity provider creates, deactivates
          and deletes operators and groups; deactivating or deleting one ends its sessions at once.</p>`
      : html`<p><${Status} value="disabled" /> Off (<code>SVC_SCIM_TOKEN</code> unset): no operator can be provisioned, so no one signs in by SSO.</p>`}</div>
    <div class="stat"><h3>Sessions</h3><dl><dt>Idle timeout</dt><dd>${duration(s.idleTimeoutS)}</dd><dt>Absolute timeout</dt><dd>${duration(s.absoluteTimeoutS)}</dd>
      <dt>Console allowlist</dt><dd>${s.consoleIpAllowlist.length === 0 ? 'any address' : html`<code>${s.consoleIpAllowlist.join(', ')}</code>`}</dd></dl></div>
  </div>`;
}

/** What any caller may see: the methods the sign-in page offers (GET /auth/methods). */
function MethodsLine() {
  const q = useQuery(() => auth<Methods>('/auth/methods'), []);
  if (!q.data) return html`<${ErrorBox} error=${q.error} />`;
  return html`<p data-testid="sign-in-methods">The sign-in page offers ${q.data.methods.map((m) => METHOD_NAMES[m] ?? m).join(', ')}; sessions end
    after ${duration(q.data.idle_timeout_s)} idle or ${duration(q.data.absolute_timeout_s)} after sign-in.</p>`;
}

function Allowlist({ projectId, canEdit }: { projectId: string; canEdit: boolean }) {
  const q = useQuery(() => gql<{ projectIpAllowlist: { cidrs: string[]; updatedAt: number | null } }>(ALLOWLIST, { projectId }), [projectId]);
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const list = q.data?.projectIpAllowlist;
  const save = async (e: Event) => {
    e.preventDefault();
    try {
      const cidrs = draft.split(/[\s,]+/).filter(Boolean);
      await gql(SET_ALLOWLIST, { projectId, cidrs });
      setError(null);
      setEditing(false);
      setSaved(cidrs.length === 0 ? 'Saved: console sessions may use this project from any address.' : 'Saved: console sessions from other addresses are refused from their next request.');
      q.reload();
    } catch (err) {
      setError(err);
    }
  };
  const bad = error instanceof ApiError && error.param?.startsWith('cidrs') ? error.message : null;
  return html`<section class="card" aria-label="Project console IP allowlist">
    <div class="card-head"><h2>This project's console IP allowlist</h2>
      ${canEdit && list ? html`<button type="button" onClick=${() => { setDraft(list.cidrs.join('\n')); setError(null); setSaved(null); setEditing(true); }}>Edit allowlist</button>` : null}</div>
    <${ErrorBox} error=${q.error} />
    ${list ? html`<p data-testid="project-allowlist">${list.cidrs.length === 0 ? 'Any address: no allowlist is set.' : html`Console sessions may use this project only from <code>${list.cidrs.join(', ')}</code>.`}
      <span class="muted"> Last change: ${fmtTime(list.updatedAt)}. It applies to console sessions, not to API keys.</span></p>` : null}
    ${saved ? html`<div class="notice" role="status">${saved}</div>` : null}
    <${SidePanel} title="Console IP allowlist" open=${editing} onClose=${() => setEditing(false)}>
      <form onSubmit=${save} aria-label="Edit the console IP allowlist" novalidate>
        <div class="field wide"><label for="allowlist-cidrs">Addresses or CIDRs, one a line (empty: any address)</label>
          <textarea id="allowlist-cidrs" name="cidrs" rows="6" class="mono" aria-invalid=${bad ? 'true' : 'false'} aria-describedby="allowlist-error"
            value=${draft} onInput=${(e: Event) => setDraft(value(e))}></textarea>
          <span class="field-error" id="allowlist-error" aria-live="polite">${bad ?? ''}</span></div>
        <p><button class="primary" type="submit">Save allowlist</button></p>
        <${ErrorBox} error=${bad ? null : error} />
      </form>
    <//>
  </section>`;
}

function Directory({ projectId }: { projectId: string }) {
  const [editing, setEditing] = useState<Group | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const q = useQuery(
    () => gql<{ operators: Operator[]; operatorGroups: Group[]; signInSettings: Settings; projects: { edges: { node: { id: string; name: string } }[] } }>(DIRECTORY),
    [],
  );
  const projects = q.data?.projects.edges.map((e) => e.node) ?? [];
  const names = new Map(projects.map((p) => [p.id, p.name]));
  const d = q.data;
  return html`
    <${ErrorBox} error=${q.error} />
    ${saved ? html`<div class="notice" role="status">${saved}</div>` : null}
    <${Card} title="Operators">
      <p class="muted">The people who sign in to this console through the identity provider, as SCIM provisioned them. Their
        role in a project is the strongest role of their groups. Deactivating, deleting and signing someone out everywhere
        are the identity provider's, through SCIM; the console changes the groups' roles.</p>
      ${d ? html`<${OperatorsTable} operators=${d.operators} names=${names} projectId=${projectId} />` : null}
    <//>
    <${Card} title="Groups and roles">
      ${d ? html`<${GroupsTable} groups=${d.operatorGroups} operators=${d.operators} names=${names} projectId=${projectId}
        onEdit=${(g: Group) => { setSaved(null); setEditing(g); }} />` : null}
    <//>
    <${Card} title="Sign-in settings">
      <p class="muted">As the gateway was started (environment); read-only here, and never a secret.</p>
      ${d ? html`<${SignInSettings} s=${d.signInSettings} />` : null}
    <//>
    <${SidePanel} title=${editing ? `Roles of ${editing.displayName}` : 'Roles'} open=${editing !== null} onClose=${() => setEditing(null)}>
      ${editing ? html`<${EditRoles} key=${editing.id} group=${editing} projects=${projects}
        onSaved=${(name: string) => { setEditing(null); setSaved(`Saved the roles of ${name}: its members' next request uses them.`); q.reload(); }} />` : null}
    <//>`;
}

export function OperatorsScreen({ viewer, projectId }: ScreenProps) {
  const operator = viewer.kind === 'operator';
  return html`
    ${operator ? html`<${Directory} projectId=${projectId} />` : html`<${Card} title="Operators">
      <${MethodsLine} />
      <p class="muted" data-testid="operators-need">The operators, their groups' roles and the sign-in settings are the operator key's to read
        and change (<code>SVC_MASTER_KEY</code>): sign in with it to see them.</p>
    <//>`}
    <${Allowlist} projectId=${projectId} canEdit=${viewer.scopes.includes('governance:manage')} />`;
}
