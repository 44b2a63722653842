import { describe, expect, it } from 'vitest';
import type { CachedKey } from '../../src/domain/auth/ports.ts';
import { KeyCache, KEY_CACHE_TTL_MS } from '../../src/domain/auth/service.ts';
import { LocalBus } from '../../src/pubsub/bus.ts';
import { FakeClock } from '../helpers/clock.ts';
import { uniqueName } from '../helpers/services.ts';

const key = (id: string, hash: string, status = 'active'): CachedKey => ({
  id,
  projectId: 'prj_1',
  scopes: ['keys:manage'],
  status,
  expiresAt: null,
  secretHash: hash,
  previousSecretHash: null,
  previousExpiresAt: null,
  lastUsedAt: null,
  budgetMicros: null,
});

const flush = () => new Promise((r) => setImmediate(r));

/** A key-row read that answers when the test says. */
function reads() {
  const pending: ((row: CachedKey | null) => void)[] = [];
  return { pending, load: () => new Promise<CachedKey | null>((answer) => pending.push(answer)) };
}

function setup(prefix = `${uniqueName('kc')}:`) {
  const clock = new FakeClock();
  return { cache: new KeyCache(new LocalBus(prefix), clock), clock, prefix };
}

describe('KeyCache (lru-cache on the injected clock)', () => {
  it('reads a key once for concurrent requests, caches only active keys, and re-reads after the TTL', async () => {
    const { cache, clock } = setup();
    const db = reads();
    const asks = [cache.fetch('h1', db.load), cache.fetch('h1', db.load), cache.fetch('h1', db.load)];
    await flush();
    expect(db.pending).toHaveLength(1);
    db.pending[0]!(key('key_1', 'h1'));
    expect((await Promise.all(asks)).map((k) => k?.id)).toEqual(['key_1', 'key_1', 'key_1']);

    clock.advance(KEY_CACHE_TTL_MS);
    expect((await cache.fetch('h1', db.load))?.id).toBe('key_1');
    expect(db.pending).toHaveLength(1);
    clock.advance(1);
    const expired = cache.fetch('h1', db.load);
    await flush();
    expect(db.pending).toHaveLength(2);
    db.pending[1]!(key('key_1', 'h1', 'revoked'));
    expect(await expired).toBeUndefined();

    const unknown = cache.fetch('h2', db.load);
    await flush();
    db.pending[2]!(null);
    expect(await unknown).toBeUndefined();
    const again = cache.fetch('h2', db.load);
    await flush();
    expect(db.pending).toHaveLength(4);
    db.pending[3]!(null);
    await again;
  });

  it('evicts both secrets of a key here and on every replica, and does not cache a read that the eviction overtook', async () => {
    const a = setup();
    const b = setup(a.prefix);
    const db = reads();
    const warm = [a.cache.fetch('current', db.load), a.cache.fetch('previous', db.load), b.cache.fetch('current', db.load)];
    await flush();
    db.pending[0]!(key('key_1', 'current'));
    db.pending[1]!(key('key_1', 'current'));
    db.pending[2]!(key('key_1', 'current'));
    await Promise.all(warm);

    // A read of another digest is running when key_1 is revoked: it may have seen the row before the commit.
    const racing = a.cache.fetch('other', db.load);
    await flush();
    await a.cache.invalidate('key_1');
    db.pending[3]!(key('key_2', 'other'));
    expect((await racing)?.id).toBe('key_2');

    const after = [a.cache.fetch('current', db.load), a.cache.fetch('previous', db.load), b.cache.fetch('current', db.load), a.cache.fetch('other', db.load)];
    await flush();
    expect(db.pending).toHaveLength(8);
    for (const answer of db.pending.slice(4)) answer(null);
    expect(await Promise.all(after)).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('answers undefined, not an error, when a revoke overtakes a read that then finds the key revoked', async () => {
    const { cache } = setup();
    const db = reads();
    await cache.fetch('h1', async () => key('key_1', 'h1'));
    await cache.invalidate('key_1');
    // The next request reads the row; the revoke's message (another replica's) arrives while it is being read.
    const reading = cache.fetch('h1', db.load);
    await flush();
    await cache.invalidate('key_1');
    db.pending[0]!(key('key_1', 'h1', 'revoked'));
    await expect(reading).resolves.toBeUndefined();
    expect(cache.get('h1')).toBeUndefined();
  });

  it('answers a cached key synchronously with get(), and nothing once it is evicted or past the TTL', async () => {
    const { cache, clock } = setup();
    expect(cache.get('h1')).toBeUndefined();
    await cache.fetch('h1', async () => key('key_1', 'h1'));
    expect(cache.get('h1')?.id).toBe('key_1');

    await cache.invalidate('key_1');
    expect(cache.get('h1')).toBeUndefined();

    await cache.fetch('h1', async () => key('key_1', 'h1'));
    clock.advance(KEY_CACHE_TTL_MS + 1);
    expect(cache.get('h1')).toBeUndefined();
  });

  it('does not trust an entry when the clock was set back', async () => {
    const { cache, clock } = setup();
    await cache.fetch('h1', async () => key('key_1', 'h1'));
    clock.advance(-1_000);
    expect(cache.get('h1')).toBeUndefined();
  });
});
