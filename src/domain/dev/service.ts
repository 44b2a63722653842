import { createHash } from 'node:crypto';
import type { DevRepository, DevRepositoryFile, DevTask, Prisma } from '../../generated/prisma/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, visibleProjectId, type Ctx } from '../context.ts';
import { pageById, type Page } from '../pagination.ts';
import { documentLimitOf, showBytes } from '../rag/limits.ts';
import { addRepositoryDocuments, documentStates, dropRepositoryDocuments, indexStates, type IndexState } from '../rag/repositories.ts';
import { parseInput } from '../validation.ts';
import { assertMayRunModelWork, notFound, readProject, writeProject } from '../verticals/access.ts';
import { enqueueWork } from '../verticals/work.ts';
import { diffCapOf, showSize } from './limits.ts';
import type { DevPorts } from './ports.ts';
import {
  CreateRepository,
  CreateReview,
  GenerateTest,
  ListFilesQuery,
  ListRepositoriesQuery,
  ListTasksQuery,
  PostFiles,
  SummarizePullRequest,
  UpdateRepository,
  type GitHost,
} from './schema.ts';

const only = <W extends object>(projectId: string | undefined, extra: W): W & { projectId?: string } => ({
  ...(projectId !== undefined ? { projectId } : {}),
  ...extra,
});

// ---- repositories ----

export type RepositoryStatus = 'indexing' | 'ready' | 'failed';

/** A repository with the indexing state of its files (read from their RAG documents, never stored twice). */
export interface RepositoryView {
  repository: DevRepository;
  status: RepositoryStatus;
  files: number;
  fileCounts: { indexing: number; ready: number; failed: number };
  /** The first failed file's error, "<path>: <code>: <message>". */
  error: string | null;
}

/**
 * `failed` once any file failed to index (post it again to retry); `indexing` while any is being indexed, and before
 * any file was posted; `ready` when every file is indexed.
 */
export function repositoryStatus(state: IndexState): RepositoryStatus {
  if (state.failed > 0) return 'failed';
  if (state.processing > 0 || state.ready === 0) return 'indexing';
  return 'ready';
}

function viewOf(repository: DevRepository, state: IndexState): RepositoryView {
  return {
    repository,
    status: repositoryStatus(state),
    files: state.processing + state.ready + state.failed,
    fileCounts: { indexing: state.processing, ready: state.ready, failed: state.failed },
    error: state.error,
  };
}

async function viewsOf(db: Ctx['db'], rows: DevRepository[]): Promise<RepositoryView[]> {
  const byProject = new Map<string, DevRepository[]>();
  for (const r of rows) byProject.set(r.projectId, [...(byProject.get(r.projectId) ?? []), r]);
  const states = new Map<string, IndexState>();
  for (const [projectId, repos] of byProject) {
    for (const [id, s] of await indexStates(db, projectId, repos.map((r) => r.id))) states.set(id, s);
  }
  return rows.map((r) => viewOf(r, states.get(r.id)!));
}

/** CONTRACT §16: a Git app comments on the big three hosts; on `other` only when told it may. */
const commentsByDefault = (host: GitHost) => host !== 'other';

/** Audits dev_repository.create. */
export async function createRepository(ctx: Ctx, raw: unknown): Promise<RepositoryView> {
  const input = parseInput(CreateRepository, raw);
  const projectId = await writeProject(ctx, input.project_id);
  const now = ctx.now();
  const gitHost = input.git_host ?? 'other';
  const row = await ctx.db.$transaction(async (tx) => {
    const created = await tx.devRepository.create({
      data: {
        id: newId('rep', now.getTime()),
        projectId,
        name: input.name,
        gitHost,
        commentsAllowed: input.comments_allowed ?? commentsByDefault(gitHost),
        defaultBranch: input.default_branch ?? 'main',
        metadata: (input.metadata ?? {}) as Prisma.InputJsonObject,
        createdAt: now,
        updatedAt: now,
      },
    });
    await recordAudit(tx, ctx, 'dev_repository.create', {
      projectId,
      targetId: created.id,
      data: { name: created.name, git_host: created.gitHost, comments_allowed: created.commentsAllowed, default_branch: created.defaultBranch },
    });
    return created;
  });
  return viewOf(row, { processing: 0, ready: 0, failed: 0, error: null });
}

export async function listRepositories(ctx: Ctx, raw: unknown): Promise<Page<RepositoryView>> {
  const query = parseInput(ListRepositoriesQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const page = await pageById(query, ctx.db.devRepository, only(projectId, {}));
  return { ...page, data: await viewsOf(ctx.db, page.data) };
}

/** The repository, in the caller's project (another project's looks absent: 404 with `param`). */
export async function findRepository(ctx: Ctx, repositoryId: string, param = 'repository_id', projectId?: string): Promise<DevRepository> {
  const visible = projectId ?? (await readProject(ctx));
  const row = await ctx.db.devRepository.findFirst({ where: only(visible, { id: repositoryId }) });
  if (!row) throw notFound(param, 'repository');
  addressed(ctx, row.projectId);
  return row;
}

/** A repository row with its files' indexing state. */
export async function viewOfRepository(ctx: Ctx, row: DevRepository): Promise<RepositoryView> {
  return (await viewsOf(ctx.db, [row]))[0]!;
}

export async function getRepository(ctx: Ctx, repositoryId: string): Promise<RepositoryView> {
  return viewOfRepository(ctx, await findRepository(ctx, repositoryId));
}

/** Audits dev_repository.update with the fields changed. */
export async function updateRepository(ctx: Ctx, repositoryId: string, raw: unknown): Promise<RepositoryView> {
  const input = parseInput(UpdateRepository, raw);
  const found = await findRepository(ctx, repositoryId);
  const now = ctx.now();
  const row = await ctx.db.$transaction(async (tx) => {
    const updated = await tx.devRepository.update({
      where: { id: found.id },
      data: {
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.git_host !== undefined ? { gitHost: input.git_host } : {}),
        ...(input.comments_allowed !== undefined ? { commentsAllowed: input.comments_allowed } : {}),
        ...(input.default_branch !== undefined ? { defaultBranch: input.default_branch } : {}),
        ...(input.metadata !== undefined ? { metadata: input.metadata as Prisma.InputJsonObject } : {}),
        updatedAt: now,
      },
    });
    const { project_id: _p, ...changes } = input;
    await recordAudit(tx, ctx, 'dev_repository.update', { projectId: updated.projectId, targetId: updated.id, data: changes });
    return updated;
  });
  return viewOfRepository(ctx, row);
}

// ---- files ----

export interface FileView {
  file: DevRepositoryFile;
  status: 'indexing' | 'ready' | 'failed';
  chunks: number;
  error: string | null;
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/**
 * (Re)indexes posted files through RAG's indexing (domain/rag/repositories.ts): a new path or new content gets a new
 * document (the previous one and its chunks go at once), unchanged content is left as it is unless it had failed
 * (posting it again retries it), and with `replace` the files not posted are removed. Each file is at most the plan's
 * RAG document limit (413 document_too_large, param files[i].content). Audits dev_repository.index (paths and
 * counts, never content). The repository is `indexing` until the background worker has indexed every file.
 */
export async function postRepositoryFiles(ports: Pick<DevPorts, 'rag'>, ctx: Ctx, repositoryId: string, raw: unknown): Promise<RepositoryView> {
  const input = parseInput(PostFiles, raw);
  const repo = await findRepository(ctx, repositoryId);
  const project = await ctx.db.project.findUnique({ where: { id: repo.projectId }, select: { plan: true } });
  const plan = project?.plan ?? 'starter';
  const limit = documentLimitOf(plan);
  const seen = new Set<string>();
  const posted = input.files.map((f, i) => {
    if (seen.has(f.path)) throw invalid(`files[${i}].path`, `The path ${f.path.slice(0, 200)} is posted twice.`);
    seen.add(f.path);
    const bytes = Buffer.byteLength(f.content, 'utf8');
    if (bytes > limit) {
      throw new SvcError('document_too_large', {
        param: `files[${i}].content`,
        message: `The file ${f.path.slice(0, 200)} is ${bytes} bytes; the ${plan} plan indexes files of up to ${showBytes(limit)} (${limit} bytes).`,
      });
    }
    if (f.content.includes('\u0000')) throw invalid(`files[${i}].content`, `The file ${f.path.slice(0, 200)} is binary (it contains NUL): only text files are indexed.`);
    return { path: f.path, content: f.content, bytes, sha256: sha256(f.content) };
  });

  const now = ctx.now();

  await ctx.db.$transaction(
    async (tx) => {
      // One posting at a time per repository (concurrent ones wait here): each reads the files the previous one left.
      await tx.$queryRaw`SELECT id FROM dev_repositories WHERE id = ${repo.id} FOR UPDATE`;
      const existing = await tx.devRepositoryFile.findMany({
        where: { projectId: repo.projectId, repositoryId: repo.id, ...(input.replace ? {} : { path: { in: [...seen] } }) },
        select: { id: true, path: true, sha256: true, documentId: true },
      });
      const byPath = new Map(existing.map((f) => [f.path, f]));
      const states = await documentStates(tx, repo.projectId, existing.filter((f) => seen.has(f.path)).map((f) => f.documentId));
      const failed = new Set([...states.values()].filter((d) => d.status === 'failed').map((d) => d.id));
      const changed = posted.filter((f) => {
        const before = byPath.get(f.path);
        return !before || before.sha256 !== f.sha256 || failed.has(before.documentId);
      });
      const removed = input.replace ? existing.filter((f) => !seen.has(f.path)) : [];

      const replaced = changed.flatMap((f) => (byPath.has(f.path) ? [byPath.get(f.path)!.documentId] : []));
      await dropRepositoryDocuments(tx, repo.projectId, repo.id, [...replaced, ...removed.map((f) => f.documentId)]);
      if (removed.length) await tx.devRepositoryFile.deleteMany({ where: { projectId: repo.projectId, id: { in: removed.map((f) => f.id) } } });
      const documentIds = await addRepositoryDocuments(
        ports.rag,
        tx,
        { projectId: repo.projectId, repositoryId: repo.id, createdBy: ctx.caller.keyId, now },
        changed.map((f) => ({ path: f.path, text: f.content, bytes: f.bytes })),
      );
      const fresh: Prisma.DevRepositoryFileCreateManyInput[] = [];
      for (const [i, f] of changed.entries()) {
        const data = { documentId: documentIds[i]!, bytes: f.bytes, sha256: f.sha256, content: f.content, updatedAt: now };
        const before = byPath.get(f.path);
        if (before) await tx.devRepositoryFile.update({ where: { id: before.id }, data });
        else fresh.push({ id: newId('rfl', now.getTime()), projectId: repo.projectId, repositoryId: repo.id, path: f.path, createdAt: now, ...data });
      }
      if (fresh.length) await tx.devRepositoryFile.createMany({ data: fresh });
      await tx.devRepository.update({ where: { id: repo.id }, data: { updatedAt: now } });
      await recordAudit(tx, ctx, 'dev_repository.index', {
        projectId: repo.projectId,
        targetId: repo.id,
        data: {
          posted: posted.length,
          indexed: changed.map((f) => f.path).slice(0, 100),
          unchanged: posted.length - changed.length,
          removed: removed.map((f) => f.path).slice(0, 100),
          bytes: changed.reduce((n, f) => n + f.bytes, 0),
        },
      });
    },
    // Up to 1,000 files, each sealed and written: longer than the default 5 s is allowed on a slow disk.
    { timeout: 60_000 },
  );
  return getRepository(ctx, repo.id);
}

/** The repository's files, newest first, each with its indexing state. */
export async function listRepositoryFiles(ctx: Ctx, repositoryId: string, raw: unknown): Promise<Page<FileView>> {
  const query = parseInput(ListFilesQuery, raw);
  const repo = await findRepository(ctx, repositoryId);
  const page = await pageById(query, ctx.db.devRepositoryFile, { projectId: repo.projectId, repositoryId: repo.id }, { omit: { content: true } });
  const states = await documentStates(ctx.db, repo.projectId, page.data.map((f) => f.documentId));
  return {
    ...page,
    data: page.data.map((file) => {
      const d = states.get(file.documentId);
      const status = d?.status === 'ready' ? 'ready' : d?.status === 'failed' ? 'failed' : 'indexing';
      return { file, status, chunks: d?.chunks ?? 0, error: d?.error ?? null };
    }),
  };
}

// ---- model work: reviews, pull-request summaries, tests ----

export type TaskKind = 'review' | 'pull_request_summary' | 'test';
const TASK = {
  review: { prefix: 'rev', param: 'review_id', what: 'review', work: 'dev.review', audit: 'dev_review.create' },
  pull_request_summary: { prefix: 'prs', param: 'summary_id', what: 'pull-request summary', work: 'dev.pull_request_summary', audit: 'dev_pull_request_summary.create' },
  test: { prefix: 'tst', param: 'test_id', what: 'test generation', work: 'dev.test', audit: 'dev_test.create' },
} as const;

/** CONTRACT §16: a diff over the plan's cap (bytes of its UTF-8) is 409 diff_too_large, param diff. */
async function assertDiffFits(ctx: Ctx, projectId: string, diff: string): Promise<void> {
  const project = await ctx.db.project.findUnique({ where: { id: projectId }, select: { plan: true } });
  const plan = project?.plan ?? 'starter';
  const cap = diffCapOf(plan);
  const bytes = Buffer.byteLength(diff, 'utf8');
  if (bytes > cap) {
    throw new SvcError('diff_too_large', { param: 'diff', message: `The diff is ${bytes} bytes; the ${plan} plan takes diffs of up to ${showSize(cap)} (${cap} bytes).` });
  }
}

/** The repository a create names, in the project the call addresses (body project_id, X-Svc-Project, the key's). */
async function repositoryOfWrite(ctx: Ctx, projectId: string | null | undefined, repositoryId: string): Promise<DevRepository> {
  return findRepository(ctx, repositoryId, 'repository_id', await visibleProjectId(ctx, projectId));
}

async function queueTask(
  ctx: Ctx,
  kind: TaskKind,
  projectId: string,
  data: Omit<Prisma.DevTaskUncheckedCreateInput, 'id' | 'projectId' | 'kind' | 'jobId' | 'createdBy' | 'createdAt'>,
  audit: Prisma.InputJsonObject,
): Promise<DevTaskView> {
  const t = TASK[kind];
  const now = ctx.now();
  return ctx.db.$transaction(async (tx) => {
    const id = newId(t.prefix, now.getTime());
    const jobId = await enqueueWork(tx, ctx, { projectId, kind: t.work, subjectId: id });
    const row = await tx.devTask.create({ data: { ...data, id, projectId, kind, status: 'queued', jobId, createdBy: ctx.caller.keyId, createdAt: now }, ...NO_DIFF });
    await recordAudit(tx, ctx, t.audit, { projectId, targetId: id, data: { ...audit, job_id: jobId } });
    return row;
  });
}

/**
 * Queues a review of the diff (asynchronous model work: GET the review, or wait for dev.review.completed). Over the
 * plan's cap: 409 diff_too_large; post_comments on a repository whose comments_allowed is false: 403
 * git_host_forbidden. Audits dev_review.create (never the diff).
 */
export async function createReview(ctx: Ctx, raw: unknown): Promise<DevTaskView> {
  const input = parseInput(CreateReview, raw);
  assertMayRunModelWork(ctx);
  const repo = await repositoryOfWrite(ctx, input.project_id, input.repository_id);
  await assertDiffFits(ctx, repo.projectId, input.diff);
  const postComments = input.post_comments ?? false;
  if (postComments && !repo.commentsAllowed) {
    throw new SvcError('git_host_forbidden', {
      param: 'post_comments',
      message: `Comments are not allowed on the repository ${repo.id} (${repo.gitHost}): set its comments_allowed to true if your Git app may comment there.`,
    });
  }
  return queueTask(
    ctx,
    'review',
    repo.projectId,
    { repositoryId: repo.id, title: input.title ?? null, diff: input.diff, diffBytes: Buffer.byteLength(input.diff, 'utf8'), postComments },
    { repository_id: repo.id, post_comments: postComments, diff_bytes: Buffer.byteLength(input.diff, 'utf8') },
  );
}

/** Queues a pull-request summary (dev.pull_request.summarized when it ends). Same diff cap as reviews. Audits dev_pull_request_summary.create. */
export async function summarizePullRequest(ctx: Ctx, raw: unknown): Promise<DevTaskView> {
  const input = parseInput(SummarizePullRequest, raw);
  assertMayRunModelWork(ctx);
  const repo = input.repository_id !== undefined ? await repositoryOfWrite(ctx, input.project_id, input.repository_id) : null;
  const projectId = repo?.projectId ?? (await writeProject(ctx, input.project_id));
  await assertDiffFits(ctx, projectId, input.diff);
  return queueTask(
    ctx,
    'pull_request_summary',
    projectId,
    { repositoryId: repo?.id ?? null, title: input.title, description: input.description ?? null, diff: input.diff, diffBytes: Buffer.byteLength(input.diff, 'utf8') },
    { repository_id: repo?.id ?? null, diff_bytes: Buffer.byteLength(input.diff, 'utf8') },
  );
}

/** Queues a test file generated from the repository's file at `path` (404 not_found, param path, when absent). Audits dev_test.create. */
export async function generateTest(ctx: Ctx, raw: unknown): Promise<DevTaskView> {
  const input = parseInput(GenerateTest, raw);
  assertMayRunModelWork(ctx);
  const repo = await repositoryOfWrite(ctx, input.project_id, input.repository_id);
  const file = await ctx.db.devRepositoryFile.findFirst({ where: { projectId: repo.projectId, repositoryId: repo.id, path: input.path }, select: { id: true } });
  if (!file) throw new SvcError('not_found', { param: 'path', message: `The repository ${repo.id} has no file ${input.path.slice(0, 200)} (POST its files first).` });
  return queueTask(
    ctx,
    'test',
    repo.projectId,
    { repositoryId: repo.id, path: input.path, framework: input.framework ?? null, instructions: input.instructions ?? null },
    { repository_id: repo.id, path: input.path, framework: input.framework ?? null },
  );
}

/** A task as reads return it: without its diff (up to 5 MB), which only the model work reads. */
export type DevTaskView = Omit<DevTask, 'diff'>;
const NO_DIFF = { omit: { diff: true } } as const;

export async function getTask(ctx: Ctx, kind: TaskKind, id: string): Promise<DevTaskView> {
  const row = await ctx.db.devTask.findFirst({ where: only(await readProject(ctx), { id, kind }), ...NO_DIFF });
  if (!row) throw notFound(TASK[kind].param, TASK[kind].what);
  addressed(ctx, row.projectId);
  return row;
}

/** Newest first, optionally of one repository and in one status. */
export async function listTasks(ctx: Ctx, kind: TaskKind, raw: unknown): Promise<Page<DevTaskView>> {
  const query = parseInput(ListTasksQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  return pageById(
    query,
    ctx.db.devTask,
    only(projectId, { kind, ...(query.repository_id ? { repositoryId: query.repository_id } : {}), ...(query.status ? { status: query.status } : {}) }),
    NO_DIFF,
  );
}
