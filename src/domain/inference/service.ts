/**
 * The inference pipeline's public entry (CONTRACT §8, §9): one file per step beside this one (see types.ts).
 * Order: validation -> project state and residency -> budget -> cache -> token reservation -> provider (with
 * fallback) -> settle tokens, spend, usage record and inference.completed.
 */
export { createInference } from './call.ts';
export { streamInference } from './stream.ts';
export { createEmbeddings, type EmbeddingsOutcome } from './embeddings.ts';
export { validateInference } from './validate.ts';
export type { CacheStatus, InferenceInput, InferenceResult, InferenceStream, InferenceSurface, StreamEvent, ThinkingEvent } from './types.ts';
