import type { DevRepository } from '../../generated/prisma/client.ts';
import { SvcError } from '../../errors/svc-error.ts';
import { RateLimitTicket } from '../../limits/requests.ts';
import { recordAudit } from '../audit/service.ts';
import type { Ctx } from '../context.ts';
import { createInference, type InferenceResult } from '../inference/service.ts';
import { searchRepository } from '../rag/service.ts';
import { parseInput } from '../validation.ts';
import { assertMayRunModelWork } from '../verticals/access.ts';
import { promptRequest } from '../verticals/prompts.ts';
import type { DevPorts } from './ports.ts';
import { ANSWER_PROMPT } from './prompts.ts';
import { AskQuestion, DEFAULT_TOP_K } from './schema.ts';
import { findRepository, viewOfRepository } from './service.ts';

export interface FileCitation {
  /** The source's number in the prompt: the answer cites it as [n]. */
  source: number;
  path: string;
  chunkId: string;
  score: number;
  text: string;
}

export interface Answer {
  repository: DevRepository;
  question: string;
  result: InferenceResult;
  citations: FileCitation[];
}

/**
 * Q&A over a repository's files, synchronously (one inference, like the `rag` option): the question is searched in
 * the repository's index (hybrid with the project's embedding model, else keyword), the chunks go to the model as
 * numbered sources (dev.answer, or the project's own template of that name), and the answer comes back with those
 * sources as file citations. 409 repository_not_indexed unless every file is indexed (status ready). Runs through
 * the inference pipeline as the caller (limits, budget, usage, inference.completed); `ticket` is the request's (REST),
 * else a tokens-only one (GraphQL: /graphql took the request). Audits dev_question.create (never the text).
 */
export async function askRepository(ports: DevPorts, ctx: Ctx, repositoryId: string, raw: unknown, ticket?: RateLimitTicket): Promise<Answer> {
  const input = parseInput(AskQuestion, raw);
  assertMayRunModelWork(ctx);
  const repo = await findRepository(ctx, repositoryId);
  const view = await viewOfRepository(ctx, repo);
  if (view.status !== 'ready') {
    throw new SvcError('repository_not_indexed', {
      param: 'repository_id',
      message:
        view.status === 'failed'
          ? `The repository ${repo.id} has files that failed to index (${view.error ?? 'see GET …/files'}); post them again.`
          : `The repository ${repo.id} is still indexing (${view.fileCounts.ready} of ${view.files} files ready); ask again when its status is ready.`,
    });
  }
  const chunks = await searchRepository(ports.rag, ctx, repo.projectId, repo.id, input.question, input.top_k ?? DEFAULT_TOP_K);
  const sources = chunks.map((c, i) => `[${i + 1}] ${c.documentName} (chunk ${c.chunkId})\n${c.text}`).join('\n\n');
  const request = await promptRequest(ports.prompts, ctx.db, repo.projectId, ANSWER_PROMPT, {
    repository: `${repo.name} (${repo.gitHost}, default branch ${repo.defaultBranch})`,
    question: input.question,
    sources: sources || '(no file matched the question)',
  });
  const result = await createInference(ports.inference, ctx, ticket ?? new RateLimitTicket(ports.limiter, ports.clock, ctx.caller), {
    ...request,
    metadata: { dev_repository_id: repo.id },
  });
  await ctx.db.$transaction((tx) =>
    recordAudit(tx, ctx, 'dev_question.create', { projectId: repo.projectId, targetId: repo.id, data: { inference_id: result.id, citations: chunks.length } }),
  );
  return {
    repository: repo,
    question: input.question,
    result,
    citations: chunks.map((c, i) => ({ source: i + 1, path: c.documentName, chunkId: c.chunkId, score: c.score, text: c.text })),
  };
}
