import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { ErrorBox, html } from '../ui.ts';
import { lineDiff, versionLines, type Version } from '../template-diff.ts';

const ROLES = ['system', 'developer', 'user', 'assistant'];
const PUBLISH = `mutation Publish($templateId: ID!, $input: PublishTemplateVersionInput!) {
  publishTemplateVersion(templateId: $templateId, input: $input) { version }
}`;
const CREATE = `mutation CreateTemplate($input: CreateTemplateInput!) { createTemplate(input: $input) { id name latestVersion } }`;

type Message = { role: string; content: string };

const value = (e: Event) => (e.target as HTMLInputElement).value;

/** The draft as the API takes it; a JSON field that does not parse throws, naming it. */
function parseDraft(d: { messages: Message[]; variables: string; model: string; params: string }) {
  const json = (text: string, field: string): unknown => {
    if (text.trim() === '') return null;
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new Error(`${field} is not valid JSON: ${(err as Error).message}`);
    }
  };
  return {
    messages: d.messages,
    variables: (json(d.variables, 'Variables') ?? []) as Version['variables'],
    model: d.model.trim() || null,
    params: json(d.params, 'Params') as Record<string, unknown> | null,
  };
}

/**
 * Edits a draft of a template version (messages, variables, model, params) with a live line diff against `base` (the
 * latest version); publishing makes it a new immutable version (POST /v1/templates/{id}/versions), or, with no
 * template yet, creates the template with it as version 1.
 */
export function VersionEditor({ templateId, base, onPublished }: { templateId: string | null; base: Version | null; onPublished: (version: number) => void }) {
  const [messages, setMessages] = useState<Message[]>(base?.messages.map((m) => ({ ...m })) ?? [{ role: 'system', content: '' }, { role: 'user', content: '{{question}}' }]);
  const [variables, setVariables] = useState(JSON.stringify(base?.variables.map((v) => ({ name: v.name, required: v.required, ...(v.default !== null && v.default !== undefined ? { default: v.default } : {}) })) ?? [{ name: 'question' }], null, 2));
  const [model, setModel] = useState(base?.model ?? '');
  const [params, setParams] = useState(base?.params ? JSON.stringify(base.params, null, 2) : '');
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  let draft: ReturnType<typeof parseDraft> | null = null;
  let draftError: string | null = null;
  try {
    draft = parseDraft({ messages, variables, model, params });
  } catch (err) {
    draftError = (err as Error).message;
  }
  const diff = draft && base ? lineDiff(versionLines(base), versionLines({ ...draft, version: 0, createdAt: 0, variables: draft.variables.map((v) => ({ name: v.name, required: v.required ?? true, default: v.default ?? null })) })) : [];
  const changed = diff.some((d) => d.op !== ' ');

  const setMessage = (i: number, patch: Partial<Message>) => setMessages(messages.map((m, j) => (j === i ? { ...m, ...patch } : m)));
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!draft) return;
    setBusy(true);
    try {
      const input = { messages: draft.messages, variables: draft.variables, model: draft.model, params: draft.params };
      if (templateId) {
        const r = await gql<{ publishTemplateVersion: { version: number } }>(PUBLISH, { templateId, input });
        onPublished(r.publishTemplateVersion.version);
      } else {
        await gql(CREATE, { input: { ...input, name: name.trim(), description: description.trim() || null } });
        onPublished(1);
      }
      setError(null);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return html`<form class="version-editor" onSubmit=${submit} aria-label=${templateId ? 'New version' : 'New template'} novalidate>
    ${templateId
      ? null
      : html`<label>Name <input name="name" required maxlength="100" value=${name} onInput=${(e: Event) => setName(value(e))} /></label>
        <label>Description <input name="description" maxlength="1000" value=${description} onInput=${(e: Event) => setDescription(value(e))} /></label>`}
    <fieldset><legend>Messages (Mustache: <code>{{variable}}</code>)</legend>
      ${messages.map((m, i) => html`<fieldset class="template-message" data-index=${i}><legend>Message ${i + 1}</legend>
        <label>Role <select name=${`role-${i}`} value=${m.role} onChange=${(e: Event) => setMessage(i, { role: value(e) })}>
          ${ROLES.map((r) => html`<option value=${r}>${r}</option>`)}
        </select></label>
        <label>Content <textarea name=${`content-${i}`} class="mono" rows="3" value=${m.content} onInput=${(e: Event) => setMessage(i, { content: value(e) })}></textarea></label>
        <button type="button" disabled=${messages.length <= 1} aria-label=${`Remove message ${i + 1}`} onClick=${() => setMessages(messages.filter((_, j) => j !== i))}>Remove</button>
      </fieldset>`)}
      <p><button type="button" onClick=${() => setMessages([...messages, { role: 'user', content: '' }])}>Add a message</button></p>
    </fieldset>
    <label>Variables (JSON: [{"name", "required"?, "default"?}]) <textarea name="variables" class="mono" rows="4" value=${variables} onInput=${(e: Event) => setVariables(value(e))}></textarea></label>
    <label>Model (empty: the request's) <input name="model" value=${model} onInput=${(e: Event) => setModel(value(e))} /></label>
    <label>Params (JSON: temperature, top_p, max_tokens, …; empty: none) <textarea name="params" class="mono" rows="2" value=${params} onInput=${(e: Event) => setParams(value(e))}></textarea></label>
    ${draftError ? html`<div class="error" role="alert"><strong>${draftError}</strong></div>` : null}
    ${base
      ? html`<h3>Changes against v${base.version}</h3>
        <div class="template-diff"><pre class="diff mono" aria-label="Draft diff">${diff.map(
          (d) => html`<div class=${d.op === '+' ? 'added' : d.op === '-' ? 'removed' : ''}>${d.op} ${d.line}</div>`,
        )}</pre></div>
        ${!changed && draft ? html`<p class="muted">No change yet: a version identical to v${base.version} would still be published as a new number.</p>` : null}`
      : null}
    <p><button class="primary" type="submit" disabled=${busy || draft === null}>${templateId ? `Publish v${(base?.version ?? 0) + 1}` : 'Create template'}</button></p>
    <${ErrorBox} error=${error} />
  </form>`;
}
