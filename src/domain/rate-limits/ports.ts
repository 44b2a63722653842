import type { VersionedLimits } from '../../limits/store.ts';

/** Tells the limiter (this replica and, over the bus, the others) that a project's limits changed. */
export interface LimitsChanged {
  limitsChanged(projectId: string, limits: VersionedLimits): Promise<void>;
}

/** What the rate-limit service needs from outside the domain. */
export interface RateLimitPorts {
  limiter: LimitsChanged;
}
