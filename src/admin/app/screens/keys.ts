import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { SCOPE_GROUPS, groupsFor, type Catalog } from '../catalog.ts';
import type { ScreenProps, Viewer } from '../viewer.ts';
import { SidePanel } from '../panel.ts';
import { Copy, ErrorBox, GroupedChecks, Pager, Status, fmtTime, fmtUsd, html, usePager, useQuery } from '../ui.ts';

interface Key {
  id: string;
  name: string;
  secret: string;
  scopes: string[];
  status: string;
  budgetUsd: number | null;
  expiresAt: number | null;
  createdAt: number;
  lastUsedAt: number | null;
}

const KEY_FIELDS = 'id name secret scopes status budgetUsd expiresAt createdAt lastUsedAt';
const LIST = `query Keys($projectId: ID, $after: String) {
  keys(projectId: $projectId, first: 20, after: $after) { edges { node { ${KEY_FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const CREATE = `mutation CreateKey($input: CreateKeyInput!) { createKey(input: $input) { secret key { id name } } }`;
const ROTATE = `mutation RotateKey($id: ID!, $overlapHours: Int) { rotateKey(id: $id, overlapHours: $overlapHours) { secret previousSecretExpiresAt key { id name } } }`;
const REVOKE = `mutation RevokeKey($id: ID!) { revokeKey(id: $id) { id status } }`;

/** A secret shown once, with a copy button, until the person says it is stored. */
function OnceSecret({ title, secret, note, onDone }: { title: string; secret: string; note?: string; onDone: () => void }) {
  return html`<div class="notice" role="status">
    <strong>${title}</strong> — copy it now: it will not be shown again.
    <div class="secret"><code data-testid="new-secret">${secret}</code><${Copy} text=${secret} label="Copy secret" /></div>
    ${note ? html`<div class="muted">${note}</div>` : null}
    <p><button type="button" onClick=${onDone}>I have stored it</button></p>
  </div>`;
}

function CreateKeyForm({ viewer, projectId, catalog, onCreated }: { viewer: Viewer; projectId: string; catalog: Catalog; onCreated: (name: string, secret: string) => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [budget, setBudget] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const toggle = (s: string) => setScopes(scopes.includes(s) ? scopes.filter((x) => x !== s) : [...scopes, s]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      const input: Record<string, unknown> = { projectId, name, scopes };
      if (budget.trim() !== '') input.budgetUsd = Number(budget);
      const r = await gql<{ createKey: { secret: string; key: { name: string } } }>(CREATE, { input });
      setName('');
      setScopes([]);
      setBudget('');
      setError(null);
      onCreated(r.createKey.key.name, r.createKey.secret);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form onSubmit=${submit} aria-label="Create a key">
    <div class="form inline">
      <label>Name <input name="name" value=${name} required maxlength="100" onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} /></label>
      <label>Monthly budget (USD, optional) <input name="budget" type="number" min="0" step="0.01" value=${budget} onInput=${(e: Event) => setBudget((e.target as HTMLInputElement).value)} /></label>
    </div>
    <${GroupedChecks} legend="Scopes (a key can only grant scopes it holds)" name="scope" groups=${groupsFor(SCOPE_GROUPS, catalog.scopes)} only=${viewer.scopes}
      selected=${scopes} onToggle=${toggle} />
    <p><button class="primary" type="submit" disabled=${busy}>Create key</button></p>
    <${ErrorBox} error=${error} />
  </form>`;
}

/** A time as two unbroken parts, the date and the time of day, so a narrow column breaks it only between them. */
function when(unix: number | null) {
  const [date, ...rest] = fmtTime(unix).split(' ');
  return rest.length ? html`<span class="nowrap">${date}</span> <span class="nowrap">${rest.join(' ')}</span>` : date;
}

function KeyRow({ k, onChanged, onSecret }: { k: Key; onChanged: () => void; onSecret: (title: string, secret: string, note?: string) => void }) {
  const [confirming, setConfirming] = useState(false);
  const [overlap, setOverlap] = useState('0');
  const [error, setError] = useState<unknown>(null);
  const act = async (run: () => Promise<void>) => {
    try {
      await run();
      setError(null);
      onChanged();
    } catch (err) {
      setError(err);
    }
  };
  const rotate = () =>
    act(async () => {
      const r = await gql<{ rotateKey: { secret: string; previousSecretExpiresAt: number } }>(ROTATE, { id: k.id, overlapHours: Number(overlap) });
      onSecret(`New secret for ${k.name}`, r.rotateKey.secret, `The previous secret works until ${fmtTime(r.rotateKey.previousSecretExpiresAt)}.`);
    });
  const revoke = () => act(async () => void (await gql(REVOKE, { id: k.id })));
  const active = k.status === 'active';
  return html`<tr data-key-id=${k.id}>
    <td><strong>${k.name}</strong><div class="mono muted">${k.id}</div></td>
    <td><code>${k.secret}</code></td>
    <td>${k.scopes.join(' ')}</td>
    <td><${Status} value=${k.status} /></td>
    <td>${fmtUsd(k.budgetUsd)}</td>
    <td>${when(k.expiresAt)}</td>
    <td>${when(k.lastUsedAt)}</td>
    <td>
      ${active
        ? html`<div class="row-actions one-row">
            <label class="inline">Overlap
              <select aria-label=${`Overlap for ${k.name}`} value=${overlap} onChange=${(e: Event) => setOverlap((e.target as HTMLSelectElement).value)}>
                <option value="0">none</option><option value="1">1 hour</option><option value="24">24 hours</option><option value="168">7 days</option>
              </select></label>
            <button type="button" onClick=${rotate}>Rotate</button>
            ${confirming
              ? html`<span class="row-actions" role="group" aria-label="Confirm revoke"><button type="button" class="danger" onClick=${revoke}>Confirm revoke</button>
                  <button type="button" onClick=${() => setConfirming(false)}>Cancel</button></span>`
              : html`<button type="button" class="danger" onClick=${() => setConfirming(true)}>Revoke</button>`}
          </div>`
        : null}
      <${ErrorBox} error=${error} />
    </td>
  </tr>`;
}

export function KeysScreen({ viewer, projectId, catalog }: ScreenProps) {
  const pager = usePager();
  const [secret, setSecret] = useState<{ title: string; secret: string; note?: string } | null>(null);
  const [creating, setCreating] = useState(false);
  const q = useQuery(
    () => gql<{ keys: { edges: { node: Key }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(LIST, { projectId, after: pager.after }),
    [projectId, pager.after],
  );
  const rows = q.data?.keys.edges ?? [];
  return html`
    ${secret ? html`<${OnceSecret} ...${secret} onDone=${() => setSecret(null)} />` : null}
    <section class="card" aria-label="Keys">
      <div class="card-head"><h2>Keys</h2><button type="button" class="primary" onClick=${() => setCreating(true)}>New key</button></div>
      <${ErrorBox} error=${q.error} />
      <div class="table-scroll"><table class="keys">
        <thead><tr><th>Name</th><th>Secret</th><th>Scopes</th><th>Status</th><th>Budget</th><th>Expires</th><th>Last used</th><th>Actions</th></tr></thead>
        <tbody>${rows.map(({ node }) => html`<${KeyRow} key=${node.id} k=${node} onChanged=${q.reload} onSecret=${(title: string, s: string, note?: string) => setSecret({ title, secret: s, note })} />`)}</tbody>
      </table></div>
      ${q.data && rows.length === 0 ? html`<p class="empty">No keys on this page.</p>` : null}
      <${Pager} pager=${pager} hasNext=${q.data?.keys.pageInfo.hasNextPage ?? false} endCursor=${q.data?.keys.pageInfo.endCursor ?? null} />
    </section>
    <${SidePanel} title="Create a key" open=${creating} onClose=${() => setCreating(false)}>
      <${CreateKeyForm} viewer=${viewer} projectId=${projectId} catalog=${catalog} onCreated=${(name: string, s: string) => {
        setCreating(false);
        setSecret({ title: `Secret of ${name}`, secret: s });
        pager.reset();
        q.reload();
      }} />
    <//>`;
}
