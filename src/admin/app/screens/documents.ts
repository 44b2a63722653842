import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import type { Viewer } from '../viewer.ts';
import { Card, ErrorBox, Pager, Status, fmtTime, html, usePager, useQuery } from '../ui.ts';

interface Doc {
  id: string;
  name: string;
  bytes: number;
  contentType: string;
  chunks: number;
  status: string;
  error: string | null;
  createdAt: number;
}

interface Chunk {
  documentId: string;
  chunkId: string;
  text: string;
  score: number;
}

type Page = { ragDocuments: { edges: { node: Doc }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } };

const FIELDS = 'id name bytes contentType chunks status error createdAt';
const LIST = `query Documents($projectId: ID, $after: String) {
  ragDocuments(projectId: $projectId, first: 20, after: $after) { edges { node { ${FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const UPLOAD = `mutation Upload($projectId: ID, $name: String!, $content: String!, $contentType: String) {
  uploadDocument(projectId: $projectId, name: $name, content: $content, contentType: $contentType) { ${FIELDS} } }`;
const DELETE = `mutation Delete($id: ID!) { deleteDocument(id: $id) { id } }`;
const QUERY = `query Search($projectId: ID, $query: String!, $mode: String, $topK: Int) {
  ragQuery(projectId: $projectId, query: $query, mode: $mode, topK: $topK) { documentId chunkId text score } }`;

const TEXT_TYPES: Record<string, string> = { md: 'text/markdown', markdown: 'text/markdown', html: 'text/html', htm: 'text/html', txt: 'text/plain' };

function UploadForm({ projectId, onUploaded }: { projectId: string; onUploaded: () => void }) {
  const [name, setName] = useState('');
  const [content, setContent] = useState('');
  const [contentType, setContentType] = useState('text/plain');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const pick = async (e: Event) => {
    const file = (e.target as HTMLInputElement).files?.[0];
    if (!file) return;
    setName(name || file.name);
    setContentType(TEXT_TYPES[file.name.toLowerCase().split('.').pop() ?? ''] ?? 'text/plain');
    setContent(await file.text());
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      await gql(UPLOAD, { projectId, name: name.trim(), content, contentType });
      setError(null);
      setName('');
      setContent('');
      onUploaded();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form onSubmit=${submit} aria-label="Upload a document">
    <label>Name <input name="name" required maxlength="200" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} /></label>
    <label>Text file (plain, markdown or HTML; PDFs through the API) <input type="file" accept=".txt,.md,.markdown,.html,.htm" onChange=${pick} /></label>
    <label>Type <select name="contentType" value=${contentType} onChange=${(e: Event) => setContentType((e.target as HTMLSelectElement).value)}>
      <option value="text/plain">text/plain</option><option value="text/markdown">text/markdown</option><option value="text/html">text/html</option>
    </select></label>
    <label>Content <textarea name="content" rows="6" required value=${content} onInput=${(e: Event) => setContent((e.target as HTMLTextAreaElement).value)}></textarea></label>
    <button class="primary" type="submit" disabled=${busy}>Upload</button>
    <${ErrorBox} error=${error} />
  </form>`;
}

function QueryBox({ projectId }: { projectId: string }) {
  const [query, setQuery] = useState('');
  const [mode, setMode] = useState('');
  const [chunks, setChunks] = useState<Chunk[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    try {
      const r = await gql<{ ragQuery: Chunk[] }>(QUERY, { projectId, query, mode: mode || null, topK: 10 });
      setChunks(r.ragQuery);
      setError(null);
    } catch (err) {
      setError(err);
    }
  };
  return html`<form class="inline" onSubmit=${submit} aria-label="Query the documents">
      <label>Query <input name="query" required value=${query} onInput=${(e: Event) => setQuery((e.target as HTMLInputElement).value)} /></label>
      <label>Mode <select name="mode" value=${mode} onChange=${(e: Event) => setMode((e.target as HTMLSelectElement).value)}>
        <option value="">default</option><option value="keyword">keyword</option><option value="vector">vector</option><option value="hybrid">hybrid</option>
      </select></label>
      <button class="primary" type="submit">Search</button>
    </form>
    <${ErrorBox} error=${error} />
    ${chunks && chunks.length === 0 ? html`<p class="empty">No chunk matches.</p>` : null}
    ${chunks && chunks.length > 0
      ? html`<ol class="chunks" aria-label="Ranked chunks">${chunks.map(
          (c) => html`<li data-chunk-id=${c.chunkId}><div class="muted"><code>${c.documentId}</code> · score ${c.score.toFixed(4)}</div><p>${c.text}</p></li>`,
        )}</ol>`
      : null}`;
}

/** RAG documents (CONTRACT §13): upload, their indexing status, and a query box showing the ranked chunks. */
export function DocumentsScreen({ projectId }: { viewer: Viewer; projectId: string }) {
  const pager = usePager();
  const [version, setVersion] = useState(0);
  const list = useQuery(() => gql<Page>(LIST, { projectId, after: pager.after }), [projectId, pager.after, version]);
  const docs = list.data?.ragDocuments.edges.map((e) => e.node) ?? [];
  const remove = async (id: string) => {
    await gql(DELETE, { id });
    setVersion(version + 1);
  };
  return html`
    <${Card} title="Upload a document"><${UploadForm} projectId=${projectId} onUploaded=${() => setVersion(version + 1)} /><//>
    <${Card} title="Documents">
      <button type="button" onClick=${() => setVersion(version + 1)}>Refresh</button>
      <${ErrorBox} error=${list.error} />
      ${list.data && docs.length === 0 ? html`<p class="empty">No documents yet.</p>` : null}
      ${docs.length > 0
        ? html`<table aria-label="Documents">
            <thead><tr><th>Name</th><th>Status</th><th>Type</th><th>Bytes</th><th>Chunks</th><th>Uploaded</th><th></th></tr></thead>
            <tbody>${docs.map(
              (d) => html`<tr data-document-id=${d.id}>
                <td>${d.name}<div class="muted"><code>${d.id}</code></div></td>
                <td><${Status} value=${d.status} />${d.error ? html`<div class="error">${d.error}</div>` : null}</td>
                <td>${d.contentType}</td><td>${d.bytes}</td><td>${d.chunks}</td><td>${fmtTime(d.createdAt)}</td>
                <td><button type="button" onClick=${() => remove(d.id)}>Delete</button></td>
              </tr>`,
            )}</tbody>
          </table>`
        : null}
      <${Pager} pager=${pager} hasNext=${list.data?.ragDocuments.pageInfo.hasNextPage ?? false} endCursor=${list.data?.ragDocuments.pageInfo.endCursor ?? null} />
    <//>
    <${Card} title="Query"><${QueryBox} projectId=${projectId} /><//>`;
}
