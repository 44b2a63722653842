import { askRepository, type Answer, type FileCitation } from '../domain/dev/answer.ts';
import { CreateRepository, CreateReview, GenerateTest, PostFiles, SummarizePullRequest, UpdateRepository } from '../domain/dev/schema.ts';
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
} from '../domain/dev/service.ts';
import type { ReviewComment, ReviewResult } from '../domain/dev/work.ts';
import { microsToUsd } from '../kernel/money.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { inputTypeFrom, listFilters, serviceInput } from './inputs.ts';

const FileCountsRef = builder.objectRef<RepositoryView['fileCounts']>('DevFileCounts').implement({
  fields: (t) => ({ indexing: t.exposeInt('indexing'), ready: t.exposeInt('ready'), failed: t.exposeInt('failed') }),
});

const RepositoryFileRef = builder.objectRef<FileView>('DevRepositoryFile').implement({
  description: "A file of a repository as last posted, and how far it is indexed.",
  fields: (t) => ({
    id: t.id({ resolve: (f) => f.file.id }),
    repositoryId: t.id({ resolve: (f) => f.file.repositoryId }),
    path: t.string({ resolve: (f) => f.file.path }),
    bytes: t.int({ resolve: (f) => f.file.bytes }),
    sha256: t.string({ resolve: (f) => f.file.sha256 }),
    status: t.string({ description: 'indexing, ready or failed.', resolve: (f) => f.status }),
    chunks: t.int({ resolve: (f) => f.chunks }),
    error: t.string({ nullable: true, resolve: (f) => f.error }),
    createdAt: t.field({ type: 'UnixSeconds', resolve: (f) => f.file.createdAt }),
    updatedAt: t.field({ type: 'UnixSeconds', resolve: (f) => f.file.updatedAt }),
  }),
});

const RepositoryRef = builder.objectRef<RepositoryView>('DevRepository').implement({
  description: 'A Dev repository: indexed from posted files (status indexing, ready or failed), asked questions, reviewed.',
  fields: (t) => ({
    id: t.id({ resolve: (v) => v.repository.id }),
    projectId: t.id({ resolve: (v) => v.repository.projectId }),
    name: t.string({ resolve: (v) => v.repository.name }),
    gitHost: t.string({ description: 'github, gitlab, bitbucket or other.', resolve: (v) => v.repository.gitHost }),
    commentsAllowed: t.boolean({ resolve: (v) => v.repository.commentsAllowed }),
    defaultBranch: t.string({ resolve: (v) => v.repository.defaultBranch }),
    status: t.string({ description: 'indexing (also before any file was posted), ready (every file indexed) or failed (a file failed).', resolve: (v) => v.status }),
    files: t.int({ resolve: (v) => v.files }),
    fileCounts: t.field({ type: FileCountsRef, resolve: (v) => v.fileCounts }),
    error: t.string({ nullable: true, description: 'The first failed file\'s error.', resolve: (v) => v.error }),
    metadata: t.field({ type: 'JSON', resolve: (v) => v.repository.metadata }),
    createdAt: t.field({ type: 'UnixSeconds', resolve: (v) => v.repository.createdAt }),
    updatedAt: t.field({ type: 'UnixSeconds', resolve: (v) => v.repository.updatedAt }),
    repositoryFiles: t.connection(
      {
        type: RepositoryFileRef,
        authScopes: { action: 'dev_repository.read' },
        resolve: (v, args, { ctx }) => serviceConnection(args, (query) => listRepositoryFiles(ctx, v.repository.id, query), (f) => f.file.id),
      },
      { name: 'DevRepositoryFileConnection' },
      { name: 'DevRepositoryFileEdge' },
    ),
  }),
});

const CommentRef = builder.objectRef<ReviewComment>('DevReviewComment').implement({
  fields: (t) => ({
    path: t.exposeString('path'),
    line: t.exposeInt('line', { description: 'The line in the new version of the file.' }),
    body: t.exposeString('body'),
    severity: t.exposeString('severity', { description: 'info, minor, major or critical.' }),
  }),
});

const taskFields = (t: any) => ({
  id: t.exposeID('id'),
  projectId: t.exposeID('projectId'),
  repositoryId: t.exposeID('repositoryId', { nullable: true }),
  status: t.exposeString('status', { description: 'queued, running, completed or failed.' }),
  error: t.field({ type: 'JSON', nullable: true, resolve: (d: DevTaskView) => d.error ?? null }),
  createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
  completedAt: t.expose('completedAt', { type: 'UnixSeconds', nullable: true }),
});

const ReviewRef = builder.objectRef<DevTaskView>('DevReview').implement({
  description: 'A model review of a diff: a summary and line comments (dev.review.completed when it ends).',
  fields: (t) => ({
    ...taskFields(t),
    title: t.exposeString('title', { nullable: true }),
    postComments: t.exposeBoolean('postComments'),
    diffBytes: t.exposeInt('diffBytes', { nullable: true }),
    summary: t.string({ nullable: true, resolve: (d) => (d.result as ReviewResult | null)?.summary ?? null }),
    comments: t.field({ type: [CommentRef], resolve: (d) => (d.result as ReviewResult | null)?.comments ?? [] }),
  }),
});

interface SummaryResult {
  summary: string;
  changes: { path: string; description: string }[];
  risk: string;
}
const ChangeRef = builder.objectRef<SummaryResult['changes'][number]>('DevPullRequestChange').implement({
  fields: (t) => ({ path: t.exposeString('path'), description: t.exposeString('description') }),
});

const SummaryRef = builder.objectRef<DevTaskView>('DevPullRequestSummary').implement({
  description: 'A model summary of a pull request (dev.pull_request.summarized when it ends).',
  fields: (t) => ({
    ...taskFields(t),
    title: t.exposeString('title', { nullable: true }),
    description: t.exposeString('description', { nullable: true }),
    diffBytes: t.exposeInt('diffBytes', { nullable: true }),
    summary: t.string({ nullable: true, resolve: (d) => (d.result as SummaryResult | null)?.summary ?? null }),
    changes: t.field({ type: [ChangeRef], resolve: (d) => (d.result as SummaryResult | null)?.changes ?? [] }),
    risk: t.string({ nullable: true, description: 'low, medium or high.', resolve: (d) => (d.result as SummaryResult | null)?.risk ?? null }),
  }),
});

interface TestResult {
  path: string;
  framework: string;
  content: string;
  notes: string;
}
const TestFileRef = builder.objectRef<TestResult>('DevTestFile').implement({
  fields: (t) => ({ path: t.exposeString('path'), content: t.exposeString('content') }),
});

const TestRef = builder.objectRef<DevTaskView>('DevTestGeneration').implement({
  description: "A test file generated by the model from a repository's file.",
  fields: (t) => ({
    ...taskFields(t),
    path: t.exposeString('path', { nullable: true }),
    framework: t.string({ nullable: true, resolve: (d) => (d.result as TestResult | null)?.framework ?? d.framework }),
    instructions: t.exposeString('instructions', { nullable: true }),
    testFile: t.field({ type: TestFileRef, nullable: true, resolve: (d) => (d.result as TestResult | null) ?? null }),
    notes: t.string({ nullable: true, resolve: (d) => (d.result as TestResult | null)?.notes ?? null }),
  }),
});

const CitationRef = builder.objectRef<FileCitation>('DevFileCitation').implement({
  fields: (t) => ({
    source: t.exposeInt('source', { description: 'The number the answer cites it by ([1]).' }),
    path: t.exposeString('path'),
    chunkId: t.exposeID('chunkId'),
    score: t.exposeFloat('score'),
    text: t.exposeString('text'),
  }),
});

const AnswerRef = builder.objectRef<Answer>('DevAnswer').implement({
  description: "An answer about a repository's code, with the files' chunks it was given as citations.",
  fields: (t) => ({
    id: t.id({ description: 'The inference id (inf_…).', resolve: (a) => a.result.id }),
    repositoryId: t.id({ resolve: (a) => a.repository.id }),
    question: t.exposeString('question'),
    answer: t.string({ resolve: (a) => a.result.content }),
    citations: t.field({ type: [CitationRef], resolve: (a) => a.citations }),
    model: t.string({ resolve: (a) => a.result.model }),
    costUsd: t.float({ resolve: (a) => microsToUsd(a.result.costMicros) }),
    createdAt: t.field({ type: 'UnixSeconds', resolve: (a) => a.result.createdAt }),
  }),
});

const CreateRepositoryInput = inputTypeFrom('CreateDevRepositoryInput', CreateRepository, { omit: ['metadata'] });
const UpdateRepositoryInput = inputTypeFrom('UpdateDevRepositoryInput', UpdateRepository, { omit: ['metadata'] });
const PostFilesInput = inputTypeFrom('PostDevRepositoryFilesInput', PostFiles, { lists: { files: 'DevRepositoryFileInput' } });
const CreateReviewInput = inputTypeFrom('CreateDevReviewInput', CreateReview);
const SummarizeInput = inputTypeFrom('SummarizePullRequestInput', SummarizePullRequest);
const GenerateTestInput = inputTypeFrom('GenerateDevTestInput', GenerateTest);

const taskList = (t: any, name: string, type: any, kind: 'review' | 'pull_request_summary' | 'test', action: string) =>
  t.connection(
    {
      type,
      nullable: true,
      authScopes: { action },
      args: { projectId: t.arg.id(), repositoryId: t.arg.id(), status: t.arg.string() },
      resolve: (_root: unknown, args: object, { ctx }: { ctx: Parameters<typeof listTasks>[0] }) =>
        serviceConnection(args, (query) => listTasks(ctx, kind, { ...query, ...listFilters(args) })),
    },
    { name: `${name}Connection` },
    { name: `${name}Edge` },
  );

builder.queryFields((t) => ({
  devRepositories: t.connection(
    {
      type: RepositoryRef,
      nullable: true,
      authScopes: { action: 'dev_repository.list' },
      args: { projectId: t.arg.id() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listRepositories(ctx, { ...query, ...listFilters(args) }), (v) => v.repository.id),
    },
    { name: 'DevRepositoryConnection' },
    { name: 'DevRepositoryEdge' },
  ),
  devRepository: t.field({
    type: RepositoryRef,
    nullable: true,
    authScopes: { action: 'dev_repository.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getRepository(ctx, String(args.id)),
  }),
  devReviews: taskList(t, 'DevReview', ReviewRef, 'review', 'dev_review.list'),
  devReview: t.field({
    type: ReviewRef,
    nullable: true,
    authScopes: { action: 'dev_review.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getTask(ctx, 'review', String(args.id)),
  }),
  devPullRequestSummaries: taskList(t, 'DevPullRequestSummary', SummaryRef, 'pull_request_summary', 'dev_pull_request_summary.list'),
  devPullRequestSummary: t.field({
    type: SummaryRef,
    nullable: true,
    authScopes: { action: 'dev_pull_request_summary.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getTask(ctx, 'pull_request_summary', String(args.id)),
  }),
  devTestGenerations: taskList(t, 'DevTestGeneration', TestRef, 'test', 'dev_test.list'),
  devTestGeneration: t.field({
    type: TestRef,
    nullable: true,
    authScopes: { action: 'dev_test.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getTask(ctx, 'test', String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  createDevRepository: t.field({
    type: RepositoryRef,
    nullable: true,
    authScopes: { action: 'dev_repository.create' },
    description: 'Audits dev_repository.create. Its status is indexing until its files are posted and indexed.',
    args: { input: t.arg({ type: CreateRepositoryInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => createRepository(ctx, serviceInput(input)),
  }),
  updateDevRepository: t.field({
    type: RepositoryRef,
    nullable: true,
    authScopes: { action: 'dev_repository.update' },
    description: 'Audits dev_repository.update.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateRepositoryInput, required: true }) },
    resolve: (_root, { id, input }, { ctx }) => updateRepository(ctx, String(id), serviceInput(input)),
  }),
  postDevRepositoryFiles: t.field({
    type: RepositoryRef,
    nullable: true,
    authScopes: { action: 'dev_repository.index' },
    description: "(Re)indexes the files posted (each at most the plan's document limit: document_too_large). Audits dev_repository.index.",
    args: { repositoryId: t.arg.id({ required: true }), input: t.arg({ type: PostFilesInput, required: true }) },
    resolve: (_root, { repositoryId, input }, { ctx, ports }) => postRepositoryFiles(ports.dev, ctx, String(repositoryId), serviceInput(input)),
  }),
  askDevRepository: t.field({
    type: AnswerRef,
    nullable: true,
    authScopes: { action: 'dev_question.create' },
    description: 'Answers synchronously through the inference pipeline (also needs inference:write); repository_not_indexed unless the repository is ready.',
    args: { repositoryId: t.arg.id({ required: true }), question: t.arg.string({ required: true }), topK: t.arg.int(), projectId: t.arg.id() },
    resolve: (_root, { repositoryId, ...input }, { ctx, ports }) => askRepository(ports.dev, ctx, String(repositoryId), listFilters(input)),
  }),
  createDevReview: t.field({
    type: ReviewRef,
    nullable: true,
    authScopes: { action: 'dev_review.create' },
    description: "Queues a review (also needs inference:write). diff_too_large over the plan's cap; git_host_forbidden when post_comments and comments are not allowed.",
    args: { input: t.arg({ type: CreateReviewInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => createReview(ctx, serviceInput(input)),
  }),
  summarizePullRequest: t.field({
    type: SummaryRef,
    nullable: true,
    authScopes: { action: 'dev_pull_request_summary.create' },
    description: "Queues a summary (also needs inference:write); diff_too_large over the plan's cap.",
    args: { input: t.arg({ type: SummarizeInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => summarizePullRequest(ctx, serviceInput(input)),
  }),
  generateDevTest: t.field({
    type: TestRef,
    nullable: true,
    authScopes: { action: 'dev_test.create' },
    description: "Queues a test file generated from the repository's file at path (not_found, param path, when absent).",
    args: { input: t.arg({ type: GenerateTestInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => generateTest(ctx, serviceInput(input)),
  }),
}));
