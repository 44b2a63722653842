import type { Db } from '../../db/client.ts';
import type { TicketLimiter } from '../../limits/requests.ts';
import type { InferencePorts } from '../inference/ports.ts';
import type { PromptTemplate } from './prompts.ts';

/**
 * Where a vertical's prompt comes from before its built-in default: a project's own template version of the same
 * name (CONTRACT §10, built by the templates capability). Until that capability provides one, `builtinPromptsOnly`
 * answers null and the built-in constant is used.
 */
export interface PromptSource {
  find(db: Db, projectId: string, name: string): Promise<PromptTemplate | null>;
}

export const builtinPromptsOnly: PromptSource = { find: async () => null };

/** What the model-work runner needs: the inference pipeline's own ports, the limiter for the job's ticket, prompts. */
export interface VerticalPorts {
  inference: InferencePorts;
  limiter: TicketLimiter;
  prompts: PromptSource;
}
