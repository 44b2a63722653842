import type { ProviderRegistry } from '../../providers/router.ts';
import type { BudgetPorts } from '../budgets/ports.ts';
import type { ProjectReader } from '../projects/ports.ts';
import type { OutcomeSink } from '../usage/ports.ts';
import type { InferencePrivacyPorts } from '../privacy/ports.ts';
import type { ResponseCache } from './cache.ts';
import type { RagPorts } from '../rag/ports.ts';
import type { TemplateReader } from '../templates/cache.ts';

/** The providers as inference uses them: routes, and calls with fallback and circuit breakers. */
export type ProviderRouter = Pick<
  ProviderRegistry,
  'isKnownModel' | 'modelType' | 'modelIds' | 'findRoute' | 'routesForModel' | 'random' | 'complete' | 'openStream' | 'embed' | 'routes' | 'circuitState'
>;

/** What the inference service needs from outside the domain (the rate-limit ticket comes with each call). */
export interface InferencePorts {
  providers: ProviderRouter;
  responseCache: ResponseCache;
  projects: ProjectReader;
  /** Where each finished request's outcome goes (usage record, inference.completed, durable spend). */
  outcomes: OutcomeSink;
  /** The budget check and the spend counters. */
  budgets: BudgetPorts;
  /** The `rag` option's search (CONTRACT §13); absent: the option is refused. */
  rag?: RagPorts;
  /** PII redaction and retention (domain/privacy). */
  privacy: InferencePrivacyPorts;
  /** Prompt templates, read through the in-process cache (CONTRACT §10). */
  templates: TemplateReader;
}
