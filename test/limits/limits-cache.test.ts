import { describe, expect, it } from 'vitest';
import { Limiter } from '../../src/limits/limiter.ts';
import type { VersionedLimits } from '../../src/limits/store.ts';
import { MemoryLimitStore } from '../../src/limits/limiter.ts';
import { LocalBus } from '../../src/pubsub/bus.ts';
import { uniqueName } from '../helpers/services.ts';

const TTL = 10_000;
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const limits = (rpm: number, version = 0): VersionedLimits => ({ requestsPerMinute: rpm, tokensPerMinute: 1000, burst: 0, version });
const flush = () => new Promise((r) => setImmediate(r));

/** A limiter whose database answers when the test says, on a time the test moves. */
function setup(prefix = `${uniqueName('lc')}:`) {
  const pending: { answer: (l: VersionedLimits) => void; fail: (e: Error) => void }[] = [];
  let now = 5_000;
  const limiter = new Limiter({
    store: new MemoryLimitStore(),
    kind: 'memory',
    loadLimits: () => new Promise((answer, fail) => pending.push({ answer, fail })),
    operatorLimits: limits(60),
    bus: new LocalBus(prefix),
    cacheTtlMs: TTL,
    monotonicNow: () => now,
  });
  return { limiter, pending, advance: (ms: number) => (now += ms), prefix };
}

async function warm(s: ReturnType<typeof setup>, l: VersionedLimits): Promise<void> {
  const first = s.limiter.limitsFor('prj_1');
  await flush();
  s.pending.at(-1)!.answer(l);
  await first;
}

describe("the limiter's cache of project limits (lru-cache)", () => {
  it('reads a project\'s limits once for concurrent requests and reuses them within the TTL', async () => {
    const s = setup();
    const asks = [s.limiter.limitsFor('prj_1'), s.limiter.limitsFor('prj_1')];
    await flush();
    expect(s.pending).toHaveLength(1);
    s.pending[0]!.answer(limits(5));
    expect((await Promise.all(asks)).map((l) => l.requestsPerMinute)).toEqual([5, 5]);
    s.advance(TTL * 0.5);
    expect((await s.limiter.limitsFor('prj_1')).requestsPerMinute).toBe(5);
    expect(s.pending).toHaveLength(1);
  });

  it('refreshes ahead of the TTL without making a request wait; an update during the refresh wins', async () => {
    const s = setup();
    await warm(s, limits(5));
    s.advance(TTL * 0.9);
    expect((await s.limiter.limitsFor('prj_1')).requestsPerMinute).toBe(5);
    expect(s.pending).toHaveLength(2);
    await s.limiter.limitsChanged('prj_1', limits(7, T0));
    // The refresh read the row before the update: its answer is not kept (the update's message evicted the project).
    s.pending[1]!.answer(limits(5));
    await flush();
    const next = s.limiter.limitsFor('prj_1');
    await flush();
    expect(s.pending).toHaveLength(3);
    s.pending[2]!.answer(limits(7, T0));
    expect(await next).toEqual(limits(7, T0));
  });

  it('drops a project on every replica when its limits change, and keeps the last limits when the database fails', async () => {
    const a = setup();
    const b = setup(a.prefix);
    await warm(a, limits(5));
    await warm(b, limits(5));
    await a.limiter.limitsChanged('prj_1', limits(9, T0));
    const onB = b.limiter.limitsFor('prj_1');
    await flush();
    expect(b.pending).toHaveLength(2);
    b.pending[1]!.answer(limits(9, T0));
    expect((await onB).requestsPerMinute).toBe(9);

    b.advance(TTL + 1);
    const stale = b.limiter.limitsFor('prj_1');
    await flush();
    b.pending[2]!.fail(new Error('database down'));
    expect((await stale).requestsPerMinute).toBe(9);
  });

  it('keeps newer limits another replica published rather than re-reading', async () => {
    const s = setup();
    await warm(s, limits(5));
    // The shared store learns version T0 (another replica's update); this replica's next request applies it.
    const store = (s.limiter as unknown as { opts: { store: MemoryLimitStore } }).opts.store;
    await store.publish('prj_1', limits(2, T0));
    await s.limiter.takeRequest({ kind: 'project', projectId: 'prj_1' }, T0);
    expect(await s.limiter.limitsFor('prj_1')).toEqual(limits(2, T0));
    expect(s.pending).toHaveLength(1);
  });
});
