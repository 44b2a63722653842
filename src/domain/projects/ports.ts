import type { CachedProject } from './cache.ts';

/** The cached project rows (and default routing policies): read on the request path. */
export interface ProjectReader {
  get(projectId: string): Promise<CachedProject | null>;
}

/** Evicts a changed project from every replica's project cache (pub/sub behind it). */
export interface ProjectEvictions {
  invalidate(projectId: string): Promise<void>;
}

/** What the project service needs from outside the domain. */
export interface ProjectPorts {
  projects: ProjectEvictions;
}
