import { describe, expect, it } from 'vitest';
import { ProjectCache, PROJECT_CACHE_TTL_MS, type CachedProject } from '../../src/domain/projects/cache.ts';
import { LocalBus } from '../../src/pubsub/bus.ts';
import { uniqueName } from '../helpers/services.ts';

const project = (id: string, budget: bigint | null = null): CachedProject => ({ id, status: 'active', region: null, budgetMicros: budget, defaultPolicy: null });

/** A database stand-in: each load waits until the test answers it. */
function rows() {
  const pending: { id: string; answer: (p: CachedProject | null) => void; fail: (e: Error) => void }[] = [];
  const load = (id: string) => new Promise<CachedProject | null>((answer, fail) => pending.push({ id, answer, fail }));
  return { load, pending };
}

const flush = () => new Promise((r) => setImmediate(r));

function setup() {
  const prefix = `${uniqueName('pc')}:`;
  const db = rows();
  let now = 1_000;
  const time = { advance: (ms: number) => (now += ms) };
  const cache = new ProjectCache(new LocalBus(prefix), db.load, () => now);
  return { cache, db, time, prefix };
}

describe('ProjectCache (lru-cache)', () => {
  it('loads a project once for all the requests asking at the same time, then answers from memory', async () => {
    const { cache, db } = setup();
    const asks = [cache.get('prj_1'), cache.get('prj_1'), cache.get('prj_1')];
    await flush();
    expect(db.pending).toHaveLength(1);
    db.pending[0]!.answer(project('prj_1'));
    expect((await Promise.all(asks)).map((p) => p?.id)).toEqual(['prj_1', 'prj_1', 'prj_1']);
    expect((await cache.get('prj_1'))?.id).toBe('prj_1');
    expect(db.pending).toHaveLength(1);
  });

  it('refreshes in the background past 80% of the TTL, and waits for a reload once it has ended', async () => {
    const { cache, db, time } = setup();
    const first = cache.get('prj_1');
    await flush();
    db.pending[0]!.answer(project('prj_1', 1n));
    await first;

    time.advance(PROJECT_CACHE_TTL_MS * 0.85);
    // Answered at once from the entry, while its reload runs.
    expect((await cache.get('prj_1'))?.budgetMicros).toBe(1n);
    expect((await cache.get('prj_1'))?.budgetMicros).toBe(1n);
    expect(db.pending).toHaveLength(2);
    db.pending[1]!.answer(project('prj_1', 2n));
    await flush();
    expect((await cache.get('prj_1'))?.budgetMicros).toBe(2n);

    time.advance(PROJECT_CACHE_TTL_MS + 1);
    let answered = false;
    const expired = cache.get('prj_1').then((p) => ((answered = true), p));
    await flush();
    expect(answered).toBe(false);
    db.pending[2]!.answer(project('prj_1', 3n));
    expect((await expired)?.budgetMicros).toBe(3n);
  });

  it('evicts on every cache sharing the bus, and does not keep a load that the eviction overtook', async () => {
    const { cache, db, prefix } = setup();
    const other = rows();
    const replica = new ProjectCache(new LocalBus(prefix), other.load, () => 1_000);
    const loads = [cache.get('prj_1'), replica.get('prj_1')];
    await flush();
    db.pending[0]!.answer(project('prj_1', 1n));
    other.pending[0]!.answer(project('prj_1', 1n));
    await Promise.all(loads);

    const reading = cache.get('prj_9');
    await flush();
    await cache.invalidate('prj_1');
    await cache.invalidate('prj_9');
    // The row read before the eviction is answered to its caller, not cached.
    db.pending[1]!.answer(project('prj_9', 1n));
    expect((await reading)?.budgetMicros).toBe(1n);

    const again = [cache.get('prj_1'), replica.get('prj_1'), cache.get('prj_9')];
    await flush();
    expect([...db.pending.slice(2), ...other.pending.slice(1)].map((p) => p.id)).toEqual(['prj_1', 'prj_9', 'prj_1']);
    db.pending[2]!.answer(project('prj_1', 2n));
    db.pending[3]!.answer(project('prj_9', 2n));
    other.pending[1]!.answer(project('prj_1', 2n));
    expect((await Promise.all(again)).map((p) => p?.budgetMicros)).toEqual([2n, 2n, 2n]);
  });

  it('answers the last row when the database fails, and fails when it has none; a missing project is not cached', async () => {
    const { cache, db, time } = setup();
    const first = cache.get('prj_1');
    await flush();
    db.pending[0]!.answer(project('prj_1', 1n));
    await first;
    time.advance(PROJECT_CACHE_TTL_MS + 1);
    const stale = cache.get('prj_1');
    await flush();
    db.pending[1]!.fail(new Error('database down'));
    expect((await stale)?.budgetMicros).toBe(1n);

    const none = cache.get('prj_2');
    await flush();
    db.pending[2]!.fail(new Error('database down'));
    await expect(none).rejects.toThrow('database down');

    const missing = cache.get('prj_3');
    await flush();
    db.pending[3]!.answer(null);
    expect(await missing).toBeNull();
    const again = cache.get('prj_3');
    await flush();
    expect(db.pending).toHaveLength(5);
    db.pending[4]!.answer(null);
    expect(await again).toBeNull();
  });
});
