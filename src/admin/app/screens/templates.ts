import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import type { Viewer } from '../viewer.ts';
import { Card, ErrorBox, Pager, fmtTime, html, usePager, useQuery } from '../ui.ts';
import { lineDiff, versionLines, type Version } from '../template-diff.ts';
import { SidePanel } from '../panel.ts';
import { VersionEditor } from './templates-editor.ts';

interface Template {
  id: string;
  name: string;
  description: string | null;
  latestVersion: number;
  updatedAt: number;
}

const LIST = `query Templates($projectId: ID, $after: String) {
  templates(projectId: $projectId, first: 20, after: $after) {
    edges { node { id name description latestVersion updatedAt } } pageInfo { hasNextPage endCursor }
  }
}`;
const VERSIONS = `query Versions($id: ID!) {
  templateVersions(templateId: $id, first: 100) {
    edges { node { version model params createdAt messages { role content } variables { name required default } } }
  }
}`;
const RENDER = `mutation Render($id: ID!, $version: Int, $variables: JSON) {
  renderTemplate(templateId: $id, version: $version, variables: $variables) { version messages { role content } }
}`;

function VersionDiff({ versions }: { versions: Version[] }) {
  const newest = versions[0]?.version ?? 1;
  const [left, setLeft] = useState(versions[1]?.version ?? newest);
  const [right, setRight] = useState(newest);
  const a = versions.find((v) => v.version === left);
  const b = versions.find((v) => v.version === right);
  const pick = (value: number, set: (n: number) => void, label: string) => html`<label>${label}
    <select value=${String(value)} onChange=${(e: Event) => set(Number((e.target as HTMLSelectElement).value))}>
      ${versions.map((v) => html`<option value=${String(v.version)}>v${v.version}</option>`)}
    </select></label>`;
  const diff = a && b ? lineDiff(versionLines(a), versionLines(b)) : [];
  return html`<div class="template-diff">
    <form class="inline" aria-label="Versions to compare" onSubmit=${(e: Event) => e.preventDefault()}>${pick(left, setLeft, 'From')} ${pick(right, setRight, 'To')}</form>
    <pre class="diff mono" aria-label="Version diff">${diff.map(
      (d) => html`<div class=${d.op === '+' ? 'added' : d.op === '-' ? 'removed' : ''}>${d.op} ${d.line}</div>`,
    )}</pre>
  </div>`;
}

function RenderPreview({ template, versions }: { template: Template; versions: Version[] }) {
  const [version, setVersion] = useState(versions[0]?.version ?? template.latestVersion);
  const [values, setValues] = useState('{}');
  const [result, setResult] = useState<{ version: number; messages: { role: string; content: string }[] } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const run = async () => {
    try {
      const variables = JSON.parse(values) as Record<string, unknown>;
      setResult((await gql<{ renderTemplate: NonNullable<typeof result> }>(RENDER, { id: template.id, version, variables })).renderTemplate);
      setError(null);
    } catch (err) {
      setResult(null);
      setError(err);
    }
  };
  const declared = versions.find((v) => v.version === version)?.variables ?? [];
  return html`<div class="render-preview">
    <form class="inline" onSubmit=${(e: Event) => { e.preventDefault(); void run(); }}>
      <label>Version <select value=${String(version)} onChange=${(e: Event) => setVersion(Number((e.target as HTMLSelectElement).value))}>
        ${versions.map((v) => html`<option value=${String(v.version)}>v${v.version}</option>`)}
      </select></label>
      <label>Variables (JSON) <textarea name="variables" rows="3" value=${values}
        placeholder=${JSON.stringify(Object.fromEntries(declared.map((d) => [d.name, ''])))}
        onInput=${(e: Event) => setValues((e.target as HTMLTextAreaElement).value)}></textarea></label>
      <button class="primary" type="submit">Render</button>
    </form>
    <${ErrorBox} error=${error} />
    ${result
      ? html`<ol class="rendered" aria-label="Rendered messages">${result.messages.map(
          (m) => html`<li><strong>${m.role}</strong><pre class="mono">${m.content}</pre></li>`,
        )}</ol>`
      : null}
  </div>`;
}

function TemplateDetail({ template, onPublished }: { template: Template; onPublished: () => void }) {
  const [refresh, setRefresh] = useState(0);
  const [editing, setEditing] = useState(false);
  const [published, setPublished] = useState<number | null>(null);
  const versions = useQuery(() => gql<{ templateVersions: { edges: { node: Version }[] } }>(VERSIONS, { id: template.id }), [template.id, refresh]);
  const list = versions.data?.templateVersions.edges.map((e) => e.node) ?? [];
  return html`<div class="template-detail" data-template-id=${template.id}>
    <${ErrorBox} error=${versions.error} />
    <p><button type="button" class="primary" disabled=${list.length === 0} onClick=${() => { setPublished(null); setEditing(true); }}>New version</button>
      <span class="muted"> Published versions never change: an edit becomes the next version.</span></p>
    ${published !== null ? html`<div class="notice" role="status">Published v${published}.</div>` : null}
    <${SidePanel} title=${`New version of ${template.name}`} wide open=${editing} onClose=${() => setEditing(false)}>
      ${editing && list[0]
        ? html`<${VersionEditor} templateId=${template.id} base=${list[0]} onPublished=${(v: number) => { setEditing(false); setPublished(v); setRefresh(refresh + 1); onPublished(); }} />`
        : null}
    <//>
    <h3>Versions</h3>
    <table aria-label="Versions">
      <thead><tr><th>Version</th><th>Model</th><th>Messages</th><th>Variables</th><th>Published</th></tr></thead>
      <tbody>${list.map(
        (v) => html`<tr><td>v${v.version}</td><td><code>${v.model ?? '—'}</code></td><td>${v.messages.length}</td>
          <td>${v.variables.map((x) => x.name).join(', ') || '—'}</td><td>${fmtTime(v.createdAt)}</td></tr>`,
      )}</tbody>
    </table>
    ${list.length > 0 ? html`<h3>Diff</h3><${VersionDiff} key=${`${template.id}-${list.length}`} versions=${list} />` : null}
    ${list.length > 0 ? html`<h3>Render preview</h3><${RenderPreview} key=${`${template.id}-${list.length}`} template=${template} versions=${list} />` : null}
  </div>`;
}

/** Prompt templates (CONTRACT §10): the list, a template's versions, a diff between two, and a render preview. */
export function TemplatesScreen({ projectId }: { viewer: Viewer; projectId: string }) {
  const pager = usePager();
  const [open, setOpen] = useState<Template | null>(null);
  const [creating, setCreating] = useState(false);
  const page = useQuery(
    () => gql<{ templates: { edges: { node: Template }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(LIST, { projectId, after: pager.after }),
    [projectId, pager.after],
  );
  const rows = page.data?.templates.edges.map((e) => e.node) ?? [];
  return html`
    <${Card} title="Prompt templates">
      <p class="muted">Versions never change once published: edit a template by publishing its next version, with the diff
        against the current one. <button type="button" onClick=${() => setCreating(true)}>New template</button></p>
      <${SidePanel} title="New template" wide open=${creating} onClose=${() => setCreating(false)}>
        ${creating ? html`<${VersionEditor} templateId=${null} base=${null} onPublished=${() => { setCreating(false); page.reload(); }} />` : null}
      <//>
      <${ErrorBox} error=${page.error} />
      ${page.data && rows.length === 0 ? html`<p class="empty">No templates yet.</p>` : null}
      ${rows.length > 0
        ? html`<table aria-label="Templates">
            <thead><tr><th>Name</th><th>Id</th><th>Latest</th><th>Updated</th><th></th></tr></thead>
            <tbody>${rows.map(
              (tpl) => html`<tr data-template-id=${tpl.id}><td>${tpl.name}<div class="muted">${tpl.description ?? ''}</div></td>
                <td><code>${tpl.id}</code></td><td>v${tpl.latestVersion}</td><td>${fmtTime(tpl.updatedAt)}</td>
                <td><button type="button" onClick=${() => setOpen(open?.id === tpl.id ? null : tpl)}>${open?.id === tpl.id ? 'Close' : 'Versions'}</button></td></tr>`,
            )}</tbody>
          </table>`
        : null}
      <${Pager} pager=${pager} hasNext=${page.data?.templates.pageInfo.hasNextPage ?? false} endCursor=${page.data?.templates.pageInfo.endCursor ?? null} />
    <//>
    ${open ? html`<${Card} title=${`Template ${open.name}`}><${TemplateDetail} key=${open.id} template=${open} onPublished=${page.reload} /><//>` : null}
  `;
}
