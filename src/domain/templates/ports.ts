import type { ProviderCatalog } from '../routing/ports.ts';
import type { TemplateReader } from './cache.ts';

/** What the template services need from outside the domain. */
export interface TemplatePorts {
  /** A template's model must be one the gateway serves. */
  providers: Pick<ProviderCatalog, 'isKnownModel'>;
  /** Reads for inference, and the eviction publish needs. */
  cache: TemplateReader & { invalidate(templateId: string): Promise<void> };
}
