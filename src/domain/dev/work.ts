import type { DevTask, Prisma, VerticalJob } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { keywordChunks } from '../rag/repositories.ts';
import type { RagChunkResult } from '../rag/service.ts';
import type { WorkError, WorkKind } from '../verticals/work.ts';
import { PULL_REQUEST_SUMMARY_PROMPT, REVIEW_PROMPT, TEST_PROMPT } from './prompts.ts';

/** Chunks of the repository a review or a test prompt carries as context (found by keyword search, no embeddings). */
export const CONTEXT_CHUNKS = 5;
/** Words of a diff or a file that make up the context query. */
const QUERY_TERMS = 20;

export interface ReviewComment {
  path: string;
  line: number;
  body: string;
  severity: string;
}
export interface ReviewResult {
  summary: string;
  comments: ReviewComment[];
}

async function subject(db: Db, job: VerticalJob): Promise<DevTask> {
  const task = await db.devTask.findFirst({ where: { id: job.subjectId, projectId: job.projectId } });
  if (!task) throw new Error(`dev work ${job.id}: its subject is gone`);
  return task;
}

async function repositoryOf(db: Db, task: DevTask) {
  if (!task.repositoryId) return null;
  return db.devRepository.findFirst({ where: { id: task.repositoryId, projectId: task.projectId } });
}

const describe = (r: { name: string; gitHost: string; defaultBranch: string } | null) => (r ? `${r.name} (${r.gitHost}, default branch ${r.defaultBranch})` : 'not given');

/** The most frequent identifiers of a text (and the words of paths), as a keyword query. */
export function queryTerms(text: string, extra: string[] = []): string {
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/[A-Za-z_][A-Za-z0-9_]{3,}/g)) counts.set(m[0], (counts.get(m[0]) ?? 0) + 1);
  const top = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([w]) => w);
  return [...new Set([...extra, ...top])].slice(0, QUERY_TERMS).join(' ');
}

/** The paths a unified diff changes (its +++ lines; a deleted file's --- line). */
export function diffPaths(diff: string): string[] {
  const paths = new Set<string>();
  for (const m of diff.matchAll(/^(?:\+\+\+|---) (?:[ab]\/)?(\S+)/gm)) if (m[1] !== '/dev/null') paths.add(m[1]!);
  return [...paths];
}

/** The changed lines of a diff (without its headers). */
const changedLines = (diff: string) =>
  diff
    .split('\n')
    .filter((l) => /^[+-]/.test(l) && !/^(\+\+\+|---) /.test(l))
    .join('\n');

const showChunks = (chunks: RagChunkResult[]) => chunks.map((c) => `--- ${c.documentName} (chunk ${c.chunkId})\n${c.text}`).join('\n\n');

async function reviewVariables(db: Db, job: VerticalJob): Promise<Record<string, unknown>> {
  const task = await subject(db, job);
  const repo = await repositoryOf(db, task);
  const diff = task.diff ?? '';
  const words = diffPaths(diff).flatMap((p) => p.split(/[/._-]+/).filter((w) => w.length > 2));
  const context = repo ? await keywordChunks(db, task.projectId, repo.id, queryTerms(changedLines(diff), words), CONTEXT_CHUNKS) : [];
  return { repository: describe(repo), title: task.title ?? '(none)', diff, context: showChunks(context) };
}

async function summaryVariables(db: Db, job: VerticalJob): Promise<Record<string, unknown>> {
  const task = await subject(db, job);
  return { repository: describe(await repositoryOf(db, task)), title: task.title ?? '', description: task.description ?? '', diff: task.diff ?? '' };
}

async function testVariables(db: Db, job: VerticalJob): Promise<Record<string, unknown>> {
  const task = await subject(db, job);
  const repo = await repositoryOf(db, task);
  const file = repo && (await db.devRepositoryFile.findFirst({ where: { projectId: task.projectId, repositoryId: repo.id, path: task.path! } }));
  if (!repo || !file) throw new Error(`dev work ${job.id}: its file is gone`);
  const words = task.path!.split(/[/._-]+/).filter((w) => w.length > 2);
  const context = await keywordChunks(db, task.projectId, repo.id, queryTerms(file.content, words), CONTEXT_CHUNKS, [file.documentId]);
  return {
    repository: describe(repo),
    path: file.path,
    file: file.content,
    framework: task.framework ?? '',
    instructions: task.instructions ?? '',
    context: showChunks(context),
  };
}

async function started(tx: Tx, job: VerticalJob): Promise<void> {
  await tx.devTask.updateMany({ where: { id: job.subjectId, status: 'queued' }, data: { status: 'running' } });
}

async function finish(tx: Tx, job: VerticalJob, data: Prisma.DevTaskUpdateManyMutationInput): Promise<DevTask> {
  await tx.devTask.updateMany({ where: { id: job.subjectId, projectId: job.projectId }, data });
  return tx.devTask.findUniqueOrThrow({ where: { id: job.subjectId } });
}

/**
 * dev.review.completed, however the review ended (status completed or failed). With post_comments the comments (and
 * the summary) ride along, for the customer's Git app (a webhook receiver) to post: the gateway never calls a Git host.
 */
async function reviewEnded(tx: Tx, task: DevTask, now: Date, result: ReviewResult | null, error: WorkError | null): Promise<void> {
  await enqueueEvent(tx, now, task.projectId, 'dev.review.completed', {
    review_id: task.id,
    repository_id: task.repositoryId,
    status: task.status,
    title: task.title,
    comment_count: result?.comments.length ?? 0,
    post_comments: task.postComments,
    ...(task.postComments && result ? { summary: result.summary, comments: result.comments as unknown as Prisma.InputJsonArray } : {}),
    ...(error ? { error: { code: error.code, message: error.message } } : {}),
  });
}

async function summaryEnded(tx: Tx, task: DevTask, now: Date, result: { summary: string; risk: string } | null, error: WorkError | null): Promise<void> {
  await enqueueEvent(tx, now, task.projectId, 'dev.pull_request.summarized', {
    summary_id: task.id,
    repository_id: task.repositoryId,
    status: task.status,
    title: task.title,
    ...(result ? { summary: result.summary, risk: result.risk } : {}),
    ...(error ? { error: { code: error.code, message: error.message } } : {}),
  });
}

const completedData = (result: unknown, now: Date) => ({ status: 'completed', result: result as Prisma.InputJsonValue, completedAt: now });
const failedData = (error: WorkError, now: Date) => ({ status: 'failed', error: error as unknown as Prisma.InputJsonObject, completedAt: now });

/** The Dev vertical's model work: reviews, pull-request summaries and test files, with their events. */
export const devWork: WorkKind[] = [
  {
    kind: 'dev.review',
    prompt: REVIEW_PROMPT,
    variables: reviewVariables,
    started,
    completed: async (tx, job, result, now) => reviewEnded(tx, await finish(tx, job, completedData(result, now)), now, result as ReviewResult, null),
    failed: async (tx, job, error, now) => reviewEnded(tx, await finish(tx, job, failedData(error, now)), now, null, error),
  },
  {
    kind: 'dev.pull_request_summary',
    prompt: PULL_REQUEST_SUMMARY_PROMPT,
    variables: summaryVariables,
    started,
    completed: async (tx, job, result, now) =>
      summaryEnded(tx, await finish(tx, job, completedData(result, now)), now, result as { summary: string; risk: string }, null),
    failed: async (tx, job, error, now) => summaryEnded(tx, await finish(tx, job, failedData(error, now)), now, null, error),
  },
  {
    kind: 'dev.test',
    prompt: TEST_PROMPT,
    variables: testVariables,
    started,
    completed: async (tx, job, result, now) => void (await finish(tx, job, completedData(result, now))),
    failed: async (tx, job, error, now) => void (await finish(tx, job, failedData(error, now))),
  },
];
