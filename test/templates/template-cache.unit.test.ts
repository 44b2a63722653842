import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/client.ts';
import { TemplateCache } from '../../src/domain/templates/cache.ts';
import { LocalBus } from '../../src/pubsub/bus.ts';
import { uniqueName } from '../helpers/services.ts';

/** A database that counts its reads: the cache must not read again once warm. */
function countingDb() {
  const reads = { templates: 0, versions: 0 };
  let latest = 1;
  const db = {
    template: {
      findUnique: async () => {
        reads.templates++;
        return { id: 'tpl_1', projectId: 'prj_1', latestVersion: latest };
      },
    },
    templateVersion: {
      findUnique: async ({ where }: any) => {
        reads.versions++;
        const { templateId, version } = where.templateId_version;
        return { templateId, version, messages: [{ role: 'user', content: `v${version}` }], variables: [], model: null, params: null };
      },
    },
  };
  return { db: db as unknown as Db, reads, publish: () => latest++ };
}

describe('TemplateCache', () => {
  it('reads a template and a version once, then from memory', async () => {
    const { db, reads } = countingDb();
    const cache = new TemplateCache(new LocalBus(uniqueName('bus')), db);
    for (let i = 0; i < 5; i++) {
      const head = await cache.template('tpl_1');
      await cache.version('tpl_1', head!.latestVersion);
    }
    expect(reads).toEqual({ templates: 1, versions: 1 });
  });

  it('sees a publish on another replica through the bus, and re-reads only the head', async () => {
    const prefix = uniqueName('bus');
    const { db, reads, publish } = countingDb();
    const here = new TemplateCache(new LocalBus(prefix), db);
    const there = new TemplateCache(new LocalBus(prefix), db);
    expect((await there.template('tpl_1'))!.latestVersion).toBe(1);
    await there.version('tpl_1', 1);
    publish();
    await here.invalidate('tpl_1');
    expect((await there.template('tpl_1'))!.latestVersion).toBe(2);
    await there.version('tpl_1', 1);
    expect(reads).toEqual({ templates: 2, versions: 1 });
  });

  it('expires a head after its TTL as a net under a lost message', async () => {
    let now = 1_000;
    const { db, reads } = countingDb();
    const cache = new TemplateCache(new LocalBus(uniqueName('bus')), db, () => now);
    await cache.template('tpl_1');
    now += 61_000;
    await cache.template('tpl_1');
    expect(reads.templates).toBe(2);
  });
});
