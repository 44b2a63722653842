import type { Clock } from '../../kernel/clock.ts';
import type { RagPorts } from '../rag/ports.ts';
import type { OncePorts } from '../inference/once.ts';
import type { VerticalPorts } from '../verticals/ports.ts';

/**
 * What the Dev services need from outside the domain (composed in app-deps.ts): the inference pipeline and the
 * limiter (a question is one inference on the request path, made as any call: no at-most-once store, the caller's own
 * Idempotency-Key covers it), the prompt source (a project's own template replaces a built-in prompt), RAG's ports (a repository's files are sealed until indexed, and a question's search embeds through them),
 * and the clock, for a question asked on GraphQL, whose tokens are drawn on a ticket of its own (the request itself
 * was taken by /graphql).
 */
export interface DevPorts extends Pick<OncePorts, 'inference' | 'limiter'>, Pick<VerticalPorts, 'prompts'> {
  rag: RagPorts;
  clock: Clock;
}
