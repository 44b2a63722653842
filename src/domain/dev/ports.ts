import type { Clock } from '../../kernel/clock.ts';
import type { RagPorts } from '../rag/ports.ts';
import type { VerticalPorts } from '../verticals/ports.ts';

/**
 * What the Dev services need from outside the domain (composed in app-deps.ts): the model-work ports every vertical
 * has (the inference pipeline; the limiter; the prompt source, where a project's own template replaces a built-in
 * prompt), RAG's ports (a repository's files are sealed until indexed, and a question's search embeds through them),
 * and the clock, for a question asked on GraphQL, whose tokens are drawn on a ticket of its own (the request itself
 * was taken by /graphql).
 */
export interface DevPorts extends VerticalPorts {
  rag: RagPorts;
  clock: Clock;
}
