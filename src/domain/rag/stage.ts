import { invalid } from '../../errors/svc-error.ts';
import type { ChatMessage } from '../../providers/types.ts';
import type { Ctx } from '../context.ts';
import type { RagPorts } from './ports.ts';
import type { RagOption } from './schema.ts';
import { searchForInference } from './service.ts';

/** CONTRACT §13: what the response carries for each chunk put in front of the model. */
export interface Citation {
  document_id: string;
  chunk_id: string;
  score: number;
}

function textOf(m: ChatMessage): string {
  const c = m.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return c.map((p) => ((p as { type?: string; text?: string }).type === 'text' ? ((p as { text?: string }).text ?? '') : '')).join(' ');
}

/**
 * The inference option `rag` (CONTRACT §13): searches the project's documents (its default mode: hybrid with an
 * embedding model, else keyword) for `rag.query`, else the last user message, and puts the chunks in a system message
 * with numbered sources ([1], [2], …) in front of the conversation (after the caller's own leading system messages).
 * Returns the messages to send and the citations, in source order. No chunk found: the messages unchanged, no
 * citations ([]).
 */
export async function applyRag(
  ports: RagPorts,
  ctx: Ctx,
  projectId: string,
  option: RagOption,
  messages: ChatMessage[],
): Promise<{ messages: ChatMessage[]; citations: Citation[] }> {
  let query = option.query;
  if (query === undefined) {
    const lastUser = [...messages].reverse().find((m) => m.role === 'user');
    query = lastUser ? textOf(lastUser).trim().slice(0, 10_000) : '';
    if (query === '') throw invalid('rag.query', 'rag.query is required when the messages have no user message with text.');
  }
  const chunks = await searchForInference(ports, ctx, projectId, query, option.top_k, option.document_ids);
  if (chunks.length === 0) return { messages, citations: [] };
  const sources = chunks.map((c, i) => `[${i + 1}] ${c.documentName} (document ${c.documentId}, chunk ${c.chunkId})\n${c.text}`).join('\n\n');
  const system: ChatMessage = {
    role: 'system',
    content:
      'Answer using the sources below where they are relevant, and cite them by number in square brackets, e.g. [1]. ' +
      'If they do not contain the answer, say so.\n\n' +
      sources,
  };
  let at = 0;
  while (at < messages.length && (messages[at]!.role === 'system' || messages[at]!.role === 'developer')) at++;
  return {
    messages: [...messages.slice(0, at), system, ...messages.slice(at)],
    citations: chunks.map((c) => ({ document_id: c.documentId, chunk_id: c.chunkId, score: c.score })),
  };
}
