import type { LRUCache } from 'lru-cache';
import type { Db } from '../../db/client.ts';
import { loadingCache, readThrough } from '../../kernel/cache.ts';
import type { Bus } from '../../pubsub/bus.ts';
import type { TemplateMessage, TemplateParams } from './schema.ts';
import type { Variable } from './render.ts';

/** What an inference needs of a template: its project (isolation) and its latest version. */
export interface CachedTemplate {
  id: string;
  projectId: string;
  latestVersion: number;
}

export interface CachedVersion {
  templateId: string;
  version: number;
  messages: TemplateMessage[];
  variables: Variable[];
  model: string | null;
  params: TemplateParams | null;
}

const CHANNEL = 'templates:changed';
/** A safety net only: publishing evicts the template here and, over the bus, on every replica. */
export const TEMPLATE_CACHE_TTL_MS = 60_000;
/** Versions never change: kept until the LRU needs the room (the TTL only bounds an entry of a deleted project). */
const VERSION_TTL_MS = 24 * 3_600_000;
const MAX_ENTRIES = 10_000;

export interface TemplateReader {
  template(templateId: string): Promise<CachedTemplate | null>;
  version(templateId: string, version: number): Promise<CachedVersion | null>;
}

export async function loadTemplate(db: Db, templateId: string): Promise<CachedTemplate | null> {
  return db.template.findUnique({ where: { id: templateId }, select: { id: true, projectId: true, latestVersion: true } });
}

export async function loadVersion(db: Db, templateId: string, version: number): Promise<CachedVersion | null> {
  const row = await db.templateVersion.findUnique({ where: { templateId_version: { templateId, version } } });
  if (!row) return null;
  return {
    templateId: row.templateId,
    version: row.version,
    messages: row.messages as unknown as TemplateMessage[],
    variables: row.variables as unknown as Variable[],
    model: row.model,
    params: (row.params as TemplateParams | null) ?? null,
  };
}

/**
 * Hot templates in process (lru-cache, kernel/cache.ts), so that a templated inference adds no SQL once warm. A
 * version is immutable and cached as long as the LRU keeps it; a template's head (project, latest version) is evicted
 * by publish before it answers, here and on the other replicas through the bus (Redis pub/sub when configured), with a
 * 60 s TTL as the net under a lost message.
 */
export class TemplateCache implements TemplateReader {
  private readonly heads: LRUCache<string, CachedTemplate>;
  private readonly versions: LRUCache<string, CachedVersion>;

  constructor(
    private readonly bus: Bus,
    db: Db,
    monotonicNow: () => number = () => performance.now(),
  ) {
    this.heads = loadingCache({ ttlMs: TEMPLATE_CACHE_TTL_MS, max: MAX_ENTRIES, now: monotonicNow, load: async (id) => (await loadTemplate(db, id)) ?? undefined });
    this.versions = loadingCache({
      ttlMs: VERSION_TTL_MS,
      max: MAX_ENTRIES,
      now: monotonicNow,
      load: async (key) => {
        const at = key.lastIndexOf('@');
        return (await loadVersion(db, key.slice(0, at), Number(key.slice(at + 1)))) ?? undefined;
      },
    });
    bus.subscribe(CHANNEL, (templateId) => this.heads.delete(templateId));
    bus.onResync(() => this.heads.clear());
  }

  async template(templateId: string): Promise<CachedTemplate | null> {
    return (await readThrough(this.heads, templateId)) ?? null;
  }

  async version(templateId: string, version: number): Promise<CachedVersion | null> {
    return (await readThrough(this.versions, `${templateId}@${version}`)) ?? null;
  }

  /** After a publish has committed: every replica reads the new latest version. */
  async invalidate(templateId: string): Promise<void> {
    this.heads.delete(templateId);
    await this.bus.publish(CHANNEL, templateId);
  }
}
