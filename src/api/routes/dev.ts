import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import { askRepository, type Answer } from '../../domain/dev/answer.ts';
import { DIFF_BODY_LIMIT, diffCapOf, showSize } from '../../domain/dev/limits.ts';
import {
  AskQuestion,
  CreateRepository,
  CreateReview,
  GenerateTest,
  ListFilesQuery,
  ListRepositoriesQuery,
  ListTasksQuery,
  PostFiles,
  RepositoryIdParams,
  ReviewIdParams,
  SummarizePullRequest,
  SummaryIdParams,
  TestIdParams,
  UpdateRepository,
} from '../../domain/dev/schema.ts';
import {
  createRepository,
  createReview,
  generateTest,
  getRepository,
  getTask,
  listRepositories,
  listRepositoryFiles,
  listTasks,
  postRepositoryFiles,
  summarizePullRequest,
  updateRepository,
  type DevTaskView,
  type FileView,
  type RepositoryView,
} from '../../domain/dev/service.ts';
import type { ReviewResult } from '../../domain/dev/work.ts';
import { documentLimitOf, MAX_DOCUMENT_BYTES, showBytes, UPLOAD_BODY_SLACK } from '../../domain/rag/limits.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { ticketOf } from '../hooks/auth.ts';
import { microsToUsd } from '../../kernel/money.ts';
import type { Static } from 'typebox';
import { ListOf, sendList } from '../list.ts';
import { DevAnswer, DevPullRequestSummary, DevRepository, DevRepositoryFile, DevReview, DevTestGeneration } from './dev-responses.ts';
import { boundBody, type BodyBound } from './uploads.ts';

export function presentRepository(v: RepositoryView) {
  const r = v.repository;
  return {
    id: r.id,
    object: 'svc.dev_repository' as const,
    project_id: r.projectId,
    name: r.name,
    git_host: r.gitHost,
    comments_allowed: r.commentsAllowed,
    default_branch: r.defaultBranch,
    status: v.status,
    files: v.files,
    file_counts: v.fileCounts,
    error: v.error,
    metadata: r.metadata,
    created_at: unixSeconds(r.createdAt),
    updated_at: unixSeconds(r.updatedAt),
  };
}

export function presentRepositoryFile(f: FileView) {
  return {
    id: f.file.id,
    object: 'svc.dev_repository_file' as const,
    repository_id: f.file.repositoryId,
    path: f.file.path,
    bytes: f.file.bytes,
    sha256: f.file.sha256,
    status: f.status,
    chunks: f.chunks,
    error: f.error,
    created_at: unixSeconds(f.file.createdAt),
    updated_at: unixSeconds(f.file.updatedAt),
  };
}

/** A review (rev_), a pull-request summary (prs_) or a test generation (tst_): the model's result in its fields. */
export function presentDevTask(t: DevTaskView) {
  const base = { id: t.id, project_id: t.projectId, repository_id: t.repositoryId, status: t.status, error: t.error ?? null, created_at: unixSeconds(t.createdAt), completed_at: unixOrNull(t.completedAt) };
  if (t.kind === 'review') {
    const r = t.result as ReviewResult | null;
    return { ...base, object: 'svc.dev_review' as const, title: t.title, post_comments: t.postComments, diff_bytes: t.diffBytes, summary: r?.summary ?? null, comments: r?.comments ?? [] };
  }
  if (t.kind === 'pull_request_summary') {
    const r = t.result as { summary: string; changes: { path: string; description: string }[]; risk: string } | null;
    return {
      ...base,
      object: 'svc.dev_pull_request_summary' as const,
      title: t.title,
      description: t.description,
      diff_bytes: t.diffBytes,
      summary: r?.summary ?? null,
      changes: r?.changes ?? [],
      risk: r?.risk ?? null,
    };
  }
  const r = t.result as { path: string; framework: string; content: string; notes: string } | null;
  return {
    ...base,
    object: 'svc.dev_test_generation' as const,
    path: t.path,
    framework: r?.framework ?? t.framework,
    instructions: t.instructions,
    test_file: r ? { path: r.path, content: r.content } : null,
    notes: r?.notes ?? null,
  };
}

// One presenter for the three kinds; each route answers one kind, so its schema is that kind's.
const presentReview = (t: DevTaskView) => presentDevTask(t) as Static<typeof DevReview>;
const presentSummary = (t: DevTaskView) => presentDevTask(t) as Static<typeof DevPullRequestSummary>;
const presentTestGeneration = (t: DevTaskView) => presentDevTask(t) as Static<typeof DevTestGeneration>;

export function presentAnswer(a: Answer) {
  const r = a.result;
  return {
    id: r.id,
    object: 'svc.dev_answer' as const,
    project_id: a.repository.projectId,
    repository_id: a.repository.id,
    question: a.question,
    answer: r.content,
    citations: a.citations.map((c) => ({ source: c.source, path: c.path, chunk_id: c.chunkId, score: c.score, text: c.text })),
    model: r.model,
    route: r.route,
    usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
    cost_usd: microsToUsd(r.costMicros),
    template_id: r.template?.id ?? null,
    created_at: unixSeconds(r.createdAt),
    request_id: r.requestId,
  };
}

/** Each file up to the largest plan's document limit, plus the JSON around them: over it is over every plan. */
const FILES_BODY_LIMIT = MAX_DOCUMENT_BYTES + 1024 * 1024;

/** How many of the plan's documents one files call may carry, in bytes of JSON: posting more takes several calls. */
const FILES_PER_BODY = 10;

/**
 * A files call's body, bounded by the caller's plan before it is read (uploads.ts boundBody): ten of its documents plus
 * the slack, at most the largest plan's (starter 11 MB, growth and enterprise 51 MB). Over it: 413 document_too_large,
 * param files.
 */
const filesBodyBound: BodyBound = {
  limitOf: (plan) => (plan === null ? FILES_BODY_LIMIT : Math.min(FILES_PER_BODY * documentLimitOf(plan), MAX_DOCUMENT_BYTES) + UPLOAD_BODY_SLACK),
  refuse: (plan, limit) =>
    new SvcError('document_too_large', {
      param: 'files',
      message: `The request body is over ${limit} bytes${plan ? `: the ${plan} plan indexes files of up to ${showBytes(documentLimitOf(plan))} each; post more files in several calls` : ''}.`,
    }),
};

/**
 * A review's or summary's body, bounded by the caller's plan (domain/dev/limits.ts's rule for DIFF_BODY_LIMIT with the
 * plan's cap: twice the cap, JSON-escaped, plus 1 MB: starter 1.4 MB, growth 3 MB, enterprise 11 MB). Over it: 409
 * diff_too_large, param diff, as for a diff over the cap.
 */
const diffBodyBound: BodyBound = {
  limitOf: (plan) => (plan === null ? DIFF_BODY_LIMIT : 2 * diffCapOf(plan) + UPLOAD_BODY_SLACK),
  refuse: (plan, limit) =>
    new SvcError('diff_too_large', {
      param: 'diff',
      message: `The request body is over ${limit} bytes${plan ? `: the ${plan} plan reviews diffs of up to ${showSize(diffCapOf(plan))}` : ''}.`,
    }),
};

/** CONTRACT §16, Dev: repositories indexed from posted files, Q&A, reviews, pull-request summaries, tests. */
export const devRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/dev/repositories', { config: { action: 'dev_repository.create' }, schema: { body: CreateRepository, response: { 200: DevRepository } } }, async (req) => presentRepository(await createRepository(req.ctx, req.body)));
  app.get('/v1/dev/repositories', { config: { action: 'dev_repository.list' }, schema: { querystring: ListRepositoriesQuery, response: { 200: ListOf(DevRepository) } } }, async (req, reply) =>
    sendList(reply, await listRepositories(req.ctx, req.query), '/v1/dev/repositories', presentRepository),
  );
  app.get('/v1/dev/repositories/:repository_id', { config: { action: 'dev_repository.read' }, schema: { params: RepositoryIdParams, response: { 200: DevRepository } } }, async (req) =>
    presentRepository(await getRepository(req.ctx, req.params.repository_id)),
  );
  app.patch('/v1/dev/repositories/:repository_id', { config: { action: 'dev_repository.update' }, schema: { params: RepositoryIdParams, body: UpdateRepository, response: { 200: DevRepository } } }, async (req) =>
    presentRepository(await updateRepository(req.ctx, req.params.repository_id, req.body)),
  );
  app.post('/v1/dev/repositories/:repository_id/files',
    {
      bodyLimit: FILES_BODY_LIMIT,
      preParsing: boundBody(filesBodyBound),
      config: { action: 'dev_repository.index', bodyTooLarge: { code: 'document_too_large', param: 'files' } },
      schema: { params: RepositoryIdParams, body: PostFiles, response: { 200: DevRepository } },
    },
    async (req) => presentRepository(await postRepositoryFiles(app.ports.dev, req.ctx, req.params.repository_id, req.body)),
  );
  app.get('/v1/dev/repositories/:repository_id/files', { config: { action: 'dev_repository.read' }, schema: { params: RepositoryIdParams, querystring: ListFilesQuery, response: { 200: ListOf(DevRepositoryFile) } } }, async (req, reply) =>
    sendList(reply, await listRepositoryFiles(req.ctx, req.params.repository_id, req.query), `/v1/dev/repositories/${req.params.repository_id}/files`, presentRepositoryFile),
  );
  app.post('/v1/dev/repositories/:repository_id/questions', { config: { action: 'dev_question.create' }, schema: { params: RepositoryIdParams, body: AskQuestion, response: { 200: DevAnswer } } }, async (req) =>
    presentAnswer(await askRepository(app.ports.dev, req.ctx, req.params.repository_id, req.body, ticketOf(req))),
  );

  const diffRoute = { bodyLimit: DIFF_BODY_LIMIT, preParsing: boundBody(diffBodyBound), config: { bodyTooLarge: { code: 'diff_too_large' as const, param: 'diff' } } };
  app.post('/v1/dev/reviews', { ...diffRoute, config: { ...diffRoute.config, action: 'dev_review.create' }, schema: { body: CreateReview, response: { 200: DevReview } } }, async (req) => presentReview(await createReview(req.ctx, req.body)));
  app.get('/v1/dev/reviews', { config: { action: 'dev_review.list' }, schema: { querystring: ListTasksQuery, response: { 200: ListOf(DevReview) } } }, async (req, reply) =>
    sendList(reply, await listTasks(req.ctx, 'review', req.query), '/v1/dev/reviews', presentReview),
  );
  app.get('/v1/dev/reviews/:review_id', { config: { action: 'dev_review.read' }, schema: { params: ReviewIdParams, response: { 200: DevReview } } }, async (req) => presentReview(await getTask(req.ctx, 'review', req.params.review_id)));

  app.post('/v1/dev/pull-requests/summaries', { ...diffRoute, config: { ...diffRoute.config, action: 'dev_pull_request_summary.create' }, schema: { body: SummarizePullRequest, response: { 200: DevPullRequestSummary } } }, async (req) =>
    presentSummary(await summarizePullRequest(req.ctx, req.body)),
  );
  app.get('/v1/dev/pull-requests/summaries', { config: { action: 'dev_pull_request_summary.list' }, schema: { querystring: ListTasksQuery, response: { 200: ListOf(DevPullRequestSummary) } } }, async (req, reply) =>
    sendList(reply, await listTasks(req.ctx, 'pull_request_summary', req.query), '/v1/dev/pull-requests/summaries', presentSummary),
  );
  app.get('/v1/dev/pull-requests/summaries/:summary_id', { config: { action: 'dev_pull_request_summary.read' }, schema: { params: SummaryIdParams, response: { 200: DevPullRequestSummary } } }, async (req) =>
    presentSummary(await getTask(req.ctx, 'pull_request_summary', req.params.summary_id)),
  );

  app.post('/v1/dev/tests', { config: { action: 'dev_test.create' }, schema: { body: GenerateTest, response: { 200: DevTestGeneration } } }, async (req) => presentTestGeneration(await generateTest(req.ctx, req.body)));
  app.get('/v1/dev/tests', { config: { action: 'dev_test.list' }, schema: { querystring: ListTasksQuery, response: { 200: ListOf(DevTestGeneration) } } }, async (req, reply) =>
    sendList(reply, await listTasks(req.ctx, 'test', req.query), '/v1/dev/tests', presentTestGeneration),
  );
  app.get('/v1/dev/tests/:test_id', { config: { action: 'dev_test.read' }, schema: { params: TestIdParams, response: { 200: DevTestGeneration } } }, async (req) => presentTestGeneration(await getTask(req.ctx, 'test', req.params.test_id)));
};
