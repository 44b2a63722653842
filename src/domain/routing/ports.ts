import type { ProviderRegistry } from '../../providers/router.ts';
import type { ProjectEvictions } from '../projects/ports.ts';

/** The configured providers as the routing rules read them (targets must name a configured route). */
export type ProviderCatalog = Pick<ProviderRegistry, 'findRoute' | 'isKnownModel' | 'modelIds' | 'routesForModel'>;

/** What the routing-policy service needs from outside the domain. */
export interface RoutingPorts {
  providers: ProviderCatalog;
  /** A changed default policy is evicted with its project. */
  projects: ProjectEvictions;
}
