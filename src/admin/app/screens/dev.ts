import { useState } from 'preact/hooks';
import { NewVerticalObject, VERTICAL_CREATES } from './verticals-create.ts';
import type { Viewer } from '../viewer.ts';
import { gql } from '../api.ts';
import { Card, ErrorBox, Pager, Status, fmtTime, html, usePager, useQuery } from '../ui.ts';

interface Repository {
  id: string;
  name: string;
  gitHost: string;
  commentsAllowed: boolean;
  defaultBranch: string;
  status: string;
  files: number;
  fileCounts: { indexing: number; ready: number; failed: number };
  error: string | null;
  createdAt: number;
}
interface Comment {
  path: string;
  line: number;
  body: string;
  severity: string;
}
interface Review {
  id: string;
  repositoryId: string | null;
  title: string | null;
  status: string;
  postComments: boolean;
  diffBytes: number | null;
  summary: string | null;
  comments: Comment[];
  error: { code: string; message: string } | null;
  createdAt: number;
  completedAt: number | null;
}
type PageInfo = { hasNextPage: boolean; endCursor: string | null };
type RepositoryPage = { devRepositories: { edges: { node: Repository }[]; pageInfo: PageInfo } };
type ReviewPage = { devReviews: { edges: { node: Review }[]; pageInfo: PageInfo } };

const REPO_FIELDS = 'id name gitHost commentsAllowed defaultBranch status files fileCounts { indexing ready failed } error createdAt';
const REVIEW_FIELDS = 'id repositoryId title status postComments diffBytes summary comments { path line body severity } error createdAt completedAt';
const REPOSITORIES = `query DevRepositories($projectId: ID, $after: String) {
  devRepositories(projectId: $projectId, first: 20, after: $after) { edges { node { ${REPO_FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const REVIEWS = `query DevReviews($projectId: ID, $repositoryId: ID, $after: String) {
  devReviews(projectId: $projectId, repositoryId: $repositoryId, first: 20, after: $after) { edges { node { ${REVIEW_FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const REVIEW = `query DevReview($id: ID!) { devReview(id: $id) { ${REVIEW_FIELDS} } }`;

/** One review: its summary and line comments, as dev.review.completed hands them to the customer's Git app. */
function ReviewView({ id, repositories, onBack }: { id: string; repositories: Map<string, Repository>; onBack: () => void }) {
  const view = useQuery(() => gql<{ devReview: Review }>(REVIEW, { id }), [id]);
  const r = view.data?.devReview;
  const repo = r?.repositoryId ? repositories.get(r.repositoryId) : undefined;
  return html`<${Card} title=${r ? `Review ${r.title ?? r.id}` : 'Review'}>
    <p><button type="button" onClick=${onBack}>← Repositories and reviews</button></p>
    <${ErrorBox} error=${view.error} />
    ${r
      ? html`<dl class="facts" aria-label="Review">
          <dt>Id</dt><dd><code>${r.id}</code></dd>
          <dt>Repository</dt><dd>${repo ? repo.name : (r.repositoryId ?? '—')}</dd>
          <dt>Status</dt><dd><${Status} value=${r.status} /></dd>
          <dt>Diff</dt><dd>${r.diffBytes ?? 0} bytes</dd>
          <dt>Post comments</dt><dd>${r.postComments ? 'yes (in dev.review.completed, for your Git app)' : 'no'}</dd>
          <dt>Requested</dt><dd>${fmtTime(r.createdAt)}</dd><dt>Completed</dt><dd>${fmtTime(r.completedAt)}</dd>
        </dl>
        ${r.error ? html`<div class="error" role="alert"><strong>${r.error.message}</strong> <code>${r.error.code}</code></div>` : null}
        <h3>Summary</h3>
        <p class="review-summary">${r.summary ?? (r.status === 'completed' ? '—' : 'Not reviewed yet.')}</p>
        <h3>Line comments</h3>
        ${r.comments.length === 0
          ? html`<p class="empty">No line comments.</p>`
          : html`<table aria-label="Line comments"><thead><tr><th>File</th><th>Line</th><th>Severity</th><th>Comment</th></tr></thead>
              <tbody>${r.comments.map((c) => html`<tr class="comment" data-severity=${c.severity}>
                <td><code>${c.path}</code></td><td>${c.line}</td><td><span class=${`severity ${c.severity}`}>${c.severity}</span></td><td>${c.body}</td>
              </tr>`)}</tbody></table>`}`
      : null}
  <//>`;
}

/** The Dev vertical (CONTRACT §16): repositories with their index status, and reviews with their line comments. */
export function DevScreen({ projectId, viewer }: { projectId: string; viewer: Viewer }) {
  const repoPager = usePager();
  const reviewPager = usePager();
  const [open, setOpen] = useState<string | null>(null);
  const [repositoryId, setRepositoryId] = useState<string | null>(null);
  const repos = useQuery(() => gql<RepositoryPage>(REPOSITORIES, { projectId, after: repoPager.after }), [projectId, repoPager.after]);
  const reviews = useQuery(() => gql<ReviewPage>(REVIEWS, { projectId, repositoryId, after: reviewPager.after }), [projectId, repositoryId, reviewPager.after]);
  const repoRows = repos.data?.devRepositories.edges.map((e) => e.node) ?? [];
  const byId = new Map(repoRows.map((r) => [r.id, r]));
  if (open) return html`<${ReviewView} id=${open} repositories=${byId} onBack=${() => setOpen(null)} />`;
  const reviewRows = reviews.data?.devReviews.edges.map((e) => e.node) ?? [];
  const filtered = repositoryId ? byId.get(repositoryId) : undefined;
  return html`<${Card} title="Dev repositories">
      <${NewVerticalObject} spec=${VERTICAL_CREATES.dev} projectId=${projectId} scopes=${viewer.scopes} onCreated=${repos.reload} />
      <${ErrorBox} error=${repos.error} />
      ${repos.data && repoRows.length === 0 ? html`<p class="empty">No repositories. Create one, then post its files (POST /v1/dev/repositories/{id}/files) to index it.</p>` : null}
      ${repoRows.length
        ? html`<table aria-label="Repositories"><thead><tr><th>Name</th><th>Host</th><th>Status</th><th>Files</th><th>Comments</th><th>Created</th></tr></thead>
            <tbody>${repoRows.map((r) => html`<tr data-repository-id=${r.id}>
              <td><a href="#" onClick=${(e: Event) => (e.preventDefault(), setRepositoryId(r.id), reviewPager.reset())}>${r.name}</a>
                <div class="muted"><code>${r.id}</code> · ${r.defaultBranch}</div></td>
              <td>${r.gitHost}</td>
              <td class="repo-status"><${Status} value=${r.status} />${r.error ? html`<div class="muted">${r.error}</div>` : null}</td>
              <td class="repo-files">${r.files === 0 ? 'no files posted' : html`${r.fileCounts.ready} of ${r.files} indexed${r.fileCounts.failed ? html`, ${r.fileCounts.failed} failed` : null}`}</td>
              <td>${r.commentsAllowed ? 'allowed' : 'not allowed'}</td>
              <td>${fmtTime(r.createdAt)}</td>
            </tr>`)}</tbody></table>`
        : null}
      <${Pager} pager=${repoPager} hasNext=${repos.data?.devRepositories.pageInfo.hasNextPage ?? false} endCursor=${repos.data?.devRepositories.pageInfo.endCursor ?? null} />
    <//>
    <${Card} title=${filtered ? `Reviews of ${filtered.name}` : 'Reviews'}>
      ${filtered ? html`<p><button type="button" onClick=${() => (setRepositoryId(null), reviewPager.reset())}>All reviews</button></p>` : null}
      <${ErrorBox} error=${reviews.error} />
      ${reviews.data && reviewRows.length === 0 ? html`<p class="empty">No reviews (POST /v1/dev/reviews).</p>` : null}
      ${reviewRows.length
        ? html`<table aria-label="Reviews"><thead><tr><th>Title</th><th>Repository</th><th>Status</th><th>Comments</th><th>Requested</th></tr></thead>
            <tbody>${reviewRows.map((r) => html`<tr data-review-id=${r.id}>
              <td><a href="#" onClick=${(e: Event) => (e.preventDefault(), setOpen(r.id))}>${r.title ?? r.id}</a></td>
              <td>${(r.repositoryId && byId.get(r.repositoryId)?.name) ?? r.repositoryId ?? '—'}</td>
              <td><${Status} value=${r.status} /></td>
              <td>${r.comments.length}</td>
              <td>${fmtTime(r.createdAt)}</td>
            </tr>`)}</tbody></table>`
        : null}
      <${Pager} pager=${reviewPager} hasNext=${reviews.data?.devReviews.pageInfo.hasNextPage ?? false} endCursor=${reviews.data?.devReviews.pageInfo.endCursor ?? null} />
    <//>`;
}
