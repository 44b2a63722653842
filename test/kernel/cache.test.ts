import { describe, expect, it } from 'vitest';
import { loadingCache } from '../../src/kernel/cache.ts';

// The in-process caches' shape (src/kernel/cache.ts): keys, projects, limits and templates use it.
describe('loadingCache', () => {
  it('keeps at most `max` entries, the least recently used leaving first', async () => {
    const loads: string[] = [];
    const cache = loadingCache<{ v: string }>({
      ttlMs: 60_000,
      max: 3,
      now: () => 0,
      load: async (key) => {
        loads.push(key);
        return { v: key };
      },
    });
    for (const k of ['a', 'b', 'c']) await cache.fetch(k);
    await cache.fetch('a'); // a is now the most recently used
    await cache.fetch('d'); // b leaves
    expect(cache.size).toBe(3);
    expect([...cache.keys()].sort()).toEqual(['a', 'c', 'd']);
    await cache.fetch('b');
    expect(loads).toEqual(['a', 'b', 'c', 'd', 'b']);
  });

  it('takes memory for the entries it holds, not for every slot up front', () => {
    // lru-cache's `max` allocates four lists of `max` slots at once (8 bytes each with a TTL): 32 MB for a million.
    const before = process.memoryUsage().heapUsed;
    const cache = loadingCache<{ v: string }>({ ttlMs: 60_000, max: 1_000_000, now: () => 0, load: async () => undefined });
    const grown = process.memoryUsage().heapUsed - before;
    expect(cache.size).toBe(0);
    expect(grown).toBeLessThan(4 * 1024 * 1024);
  });
});
