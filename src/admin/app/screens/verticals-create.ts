import { useState } from 'preact/hooks';
import { ApiError, gql } from '../api.ts';
import { SidePanel } from '../panel.ts';
import { ErrorBox, html } from '../ui.ts';

/** A field of a create form: its API name (snake_case, as errors name it), its GraphQL name, label and kind. */
interface Field {
  param: string;
  input: string;
  label: string;
  kind?: 'text' | 'textarea' | 'select' | 'checkbox';
  options?: readonly string[];
  required?: boolean;
  placeholder?: string;
}

interface CreateSpec {
  /** The object's name in the button and panel ("case", "incident"). */
  noun: string;
  mutation: string;
  /** The mutation's field in `data`. */
  field: string;
  fields: Field[];
  /** The scope creating needs (the button is not shown without it). */
  scope: string;
  note?: string;
}

/** The simple objects of the four verticals (CONTRACT §16), created over GraphQL like every console write. */
export const VERTICAL_CREATES = {
  risk: {
    noun: 'case',
    scope: 'risk:write',
    field: 'createRiskCase',
    mutation: `mutation CreateRiskCase($input: CreateRiskCaseInput!) { createRiskCase(input: $input) { id } }`,
    fields: [
      { param: 'title', input: 'title', label: 'Title', required: true },
      { param: 'assignee', input: 'assignee', label: 'Assignee', required: true, placeholder: 'a person or key id' },
      { param: 'reviewer', input: 'reviewer', label: 'Reviewer (not the assignee)', required: true },
      { param: 'description', input: 'description', label: 'Description', kind: 'textarea' },
    ],
    note: 'The reviewer must be another person than the assignee (409 segregation_of_duties).',
  },
  ops: {
    noun: 'incident',
    scope: 'ops:write',
    field: 'openIncident',
    mutation: `mutation OpenIncident($input: OpenIncidentInput!) { openIncident(input: $input) { id } }`,
    fields: [
      { param: 'title', input: 'title', label: 'Title', required: true },
      { param: 'severity', input: 'severity', label: 'Severity', kind: 'select', options: ['sev1', 'sev2', 'sev3', 'sev4'], required: true },
      { param: 'service', input: 'service', label: 'Service', placeholder: 'checkout' },
      { param: 'summary', input: 'summary', label: 'Summary (the first timeline entry)', kind: 'textarea' },
    ],
    note: 'Opening emits ops.incident.opened to the project\'s webhooks.',
  },
  legal: {
    noun: 'matter',
    scope: 'legal:write',
    field: 'createLegalMatter',
    mutation: `mutation CreateLegalMatter($input: CreateLegalMatterInput!) { createLegalMatter(input: $input) { id } }`,
    fields: [
      { param: 'name', input: 'name', label: 'Name', required: true, placeholder: 'Acme supply agreement' },
      { param: 'client', input: 'client', label: 'Client' },
      { param: 'description', input: 'description', label: 'Description', kind: 'textarea' },
    ],
  },
  dev: {
    noun: 'repository',
    scope: 'dev:write',
    field: 'createDevRepository',
    mutation: `mutation CreateDevRepository($input: CreateDevRepositoryInput!) { createDevRepository(input: $input) { id } }`,
    fields: [
      { param: 'name', input: 'name', label: 'Name', required: true, placeholder: 'acme/api' },
      { param: 'git_host', input: 'gitHost', label: 'Git host', kind: 'select', options: ['github', 'gitlab', 'bitbucket', 'other'] },
      { param: 'default_branch', input: 'defaultBranch', label: 'Default branch', placeholder: 'main' },
      { param: 'comments_allowed', input: 'commentsAllowed', label: 'Reviews may comment on the host', kind: 'checkbox' },
    ],
    note: 'A repository is indexing until its files are posted (POST /v1/dev/repositories/{id}/files).',
  },
} satisfies Record<string, CreateSpec>;

function CreateForm({ spec, projectId, onCreated }: { spec: CreateSpec; projectId: string; onCreated: (id: string) => void }) {
  const [values, setValues] = useState<Record<string, string | boolean>>(
    Object.fromEntries(spec.fields.map((f) => [f.input, f.kind === 'checkbox' ? false : f.kind === 'select' ? f.options![0]! : ''])),
  );
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const param = error instanceof ApiError ? error.param : null;
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      const input: Record<string, unknown> = { projectId };
      for (const f of spec.fields) {
        const v = values[f.input];
        if (typeof v === 'string' ? v.trim() !== '' : f.kind === 'checkbox') input[f.input] = typeof v === 'string' ? v.trim() : v;
      }
      const data = await gql<Record<string, { id: string }>>(spec.mutation, { input });
      setError(null);
      onCreated(data[spec.field]!.id);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const set = (name: string, v: string | boolean) => setValues({ ...values, [name]: v });
  return html`<form onSubmit=${submit} aria-label=${`New ${spec.noun}`} novalidate>
    ${spec.note ? html`<p class="muted">${spec.note}</p>` : null}
    ${spec.fields.map((f) => {
      const id = `new-${spec.noun}-${f.param}`;
      const invalid = param === f.param ? 'true' : 'false';
      if (f.kind === 'checkbox') {
        return html`<div class="check"><input type="checkbox" id=${id} name=${f.param} checked=${values[f.input] === true}
          onChange=${(e: Event) => set(f.input, (e.target as HTMLInputElement).checked)} /><label for=${id}>${f.label}</label></div>`;
      }
      if (f.kind === 'select') {
        return html`<label for=${id}>${f.label}<select id=${id} name=${f.param} value=${String(values[f.input])} aria-invalid=${invalid}
          onChange=${(e: Event) => set(f.input, (e.target as HTMLSelectElement).value)}>${f.options!.map((o) => html`<option value=${o}>${o}</option>`)}</select></label>`;
      }
      if (f.kind === 'textarea') {
        return html`<label for=${id}>${f.label}<textarea id=${id} name=${f.param} rows="3" aria-invalid=${invalid}
          value=${String(values[f.input])} onInput=${(e: Event) => set(f.input, (e.target as HTMLTextAreaElement).value)}></textarea></label>`;
      }
      return html`<label for=${id}>${f.label}<input id=${id} name=${f.param} required=${f.required ?? false} placeholder=${f.placeholder ?? ''}
        aria-invalid=${invalid} value=${String(values[f.input])} onInput=${(e: Event) => set(f.input, (e.target as HTMLInputElement).value)} /></label>`;
    })}
    <p><button class="primary" type="submit" disabled=${busy}>Create ${spec.noun}</button></p>
    <${ErrorBox} error=${error} />
  </form>`;
}

/** "New …" beside a vertical's list: the form opens in the side panel; the list reloads after a create. */
export function NewVerticalObject({ spec, projectId, scopes, onCreated }: { spec: CreateSpec; projectId: string; scopes: string[]; onCreated: () => void }) {
  const [open, setOpen] = useState(false);
  const [created, setCreated] = useState<string | null>(null);
  if (!scopes.includes(spec.scope)) return html`<p class="muted">Creating a ${spec.noun} needs <code>${spec.scope}</code>.</p>`;
  return html`<p>
      <button type="button" class="primary" onClick=${() => { setCreated(null); setOpen(true); }}>New ${spec.noun}</button>
      ${created ? html` <span role="status" class="muted">Created <code>${created}</code>.</span>` : null}
    </p>
    <${SidePanel} title=${`New ${spec.noun}`} open=${open} onClose=${() => setOpen(false)}>
      ${open ? html`<${CreateForm} spec=${spec} projectId=${projectId} onCreated=${(id: string) => { setOpen(false); setCreated(id); onCreated(); }} />` : null}
    <//>`;
}
