import type { Ctx } from '../context.ts';
import type { RouteName } from '../auth/actions.ts';

/** What the RAG services need from outside the domain, composed in app-deps.ts. */
export interface RagPorts {
  /** Seals a document's extracted text at rest until it is indexed (the secret box; `aad` is the document id). */
  sealer: { seal(plaintext: string, aad: string): string; open(sealed: string, aad: string): string };
  /**
   * Embeds texts with the project's embedding model as the caller in `ctx`, through the inference pipeline (the
   * /v1/embeddings service: project state, residency, budget, token windows, spend, usage record, inference.completed).
   * One vector per text, in order.
   */
  embed(ctx: Ctx, projectId: string, model: string, texts: string[]): Promise<number[][]>;
  /** The model's type, undefined when no provider serves it. */
  modelType(model: string): 'chat' | 'embedding' | undefined;
  /** The routes serving a model (for a key's model list, CONTRACT §22). */
  routesForModel(model: string): readonly RouteName[];
}
