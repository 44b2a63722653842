import type { InferencePorts } from '../inference/ports.ts';
import type { ContentSealer } from '../privacy/ports.ts';

/** What files and batches need from outside: the content sealer, the project's retention, the models. */
export interface BatchPorts {
  /** Files and result lines are sealed at rest as retained content is (CONTRACT §12). */
  sealer: ContentSealer;
  /** The project's retention: zero keeps no files. */
  retentionOf(projectId: string): Promise<{ mode: string; days: number }>;
  /** A model's type ('chat' | 'embedding'), undefined when unknown ("auto" is chat). */
  modelType(model: string): string | undefined;
}

/** The batch ports over the inference pipeline's (app.ports.inference, the GraphQL context's ports.inference). */
export function batchPortsOf(inference: InferencePorts): BatchPorts {
  return {
    sealer: inference.privacy.sealer,
    retentionOf: async (projectId) => {
      const p = (await inference.projects.get(projectId))?.privacy;
      return { mode: p?.retentionMode ?? 'standard', days: p?.retentionDays ?? 30 };
    },
    modelType: (model) => (model === 'auto' ? 'chat' : inference.providers.modelType(model)),
  };
}
