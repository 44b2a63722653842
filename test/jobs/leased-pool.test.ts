import { describe, expect, it } from 'vitest';
import { drainWithLease, LeasedPool, type LeasedWork } from '../../src/jobs/leased-pool.ts';

/** A table of due items in memory: a claim leases up to `limit` of them (never one this process is working on). */
function table(n: number) {
  const due = Array.from({ length: n }, (_, i) => `item_${i}`);
  const claims: number[] = [];
  const errors: unknown[] = [];
  const log = { error: (obj: object) => errors.push(obj) };
  const spec = (work: (id: string) => Promise<string>): LeasedWork<string, string> => ({
    name: 'test pool',
    claim: async (limit, working) => {
      claims.push(limit);
      const taken = due.filter((id) => !working.has(id)).slice(0, limit);
      for (const id of taken) due.splice(due.indexOf(id), 1);
      return taken;
    },
    idOf: (id) => id,
    work,
  });
  return { due, claims, errors, log, spec };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('LeasedPool', () => {
  it('runPending works every due item one after the other, claiming claimSize at a time until a claim comes back short', async () => {
    const t = table(7);
    const order: string[] = [];
    const pool = new LeasedPool(t.log, t.spec(async (id) => (order.push(id), `done ${id}`)), { pollMs: 60_000, maxActive: 1, claimSize: 3 });
    expect(await pool.runPending()).toEqual(Array.from({ length: 7 }, (_, i) => `done item_${i}`));
    expect(t.claims).toEqual([3, 3, 3]);
    expect(t.due).toEqual([]);
  });

  it('start() keeps at most maxActive items in hand, refills as each ends, and stop() waits for them', async () => {
    const t = table(5);
    let inHand = 0;
    let most = 0;
    const release: (() => void)[] = [];
    const pool = new LeasedPool(
      t.log,
      t.spec(async (id) => {
        most = Math.max(most, ++inHand);
        await new Promise<void>((r) => release.push(r));
        inHand--;
        return id;
      }),
      { pollMs: 60_000, maxActive: 2 },
    );
    pool.start();
    for (let i = 0; i < 20 && release.length < 2; i++) await tick();
    expect(inHand).toBe(2);
    while (t.due.length > 0 || inHand > 0) {
      release.shift()?.();
      for (let i = 0; i < 20; i++) await tick();
    }
    expect(most).toBe(2);
    await pool.stop();
    expect(t.errors).toEqual([]);
  });

  it('logs an item that throws and goes on with the others', async () => {
    const t = table(3);
    const pool = new LeasedPool(t.log, { ...t.spec(async (id) => (id === 'item_1' ? Promise.reject(new Error('boom')) : id)), idField: 'batch_id' }, { pollMs: 60_000, maxActive: 1 });
    pool.start();
    for (let i = 0; i < 50 && t.due.length > 0; i++) await tick();
    await pool.stop();
    expect(t.due).toEqual([]);
    expect(t.errors).toEqual([expect.objectContaining({ batch_id: 'item_1' })]);
  });

  it('stop() ends a sleep at once and runPending does no more', async () => {
    const t = table(2);
    const pool = new LeasedPool(t.log, t.spec(async (id) => id), { pollMs: 60_000, maxActive: 1 });
    const started = Date.now();
    const sleeping = pool.sleep(60_000);
    await pool.stop();
    await sleeping;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(pool.stopped).toBe(true);
    expect(await pool.runPending()).toEqual([]);
    expect(t.due).toHaveLength(2);
  });
});

describe('drainWithLease', () => {
  it('runs the queue with the given concurrency and stops taking items once told to', async () => {
    const queue = Array.from({ length: 10 }, (_, i) => i);
    let inFlight = 0;
    let most = 0;
    const done: number[] = [];
    let renewals = 0;
    await drainWithLease(
      queue,
      3,
      () => done.length >= 6,
      async (n) => {
        most = Math.max(most, ++inFlight);
        await tick();
        inFlight--;
        done.push(n);
      },
      { everyMs: 60_000, renew: async () => renewals++ },
    );
    expect(most).toBe(3);
    // The three in flight when the sixth ended finish; nothing after them starts.
    expect(done.length).toBeGreaterThanOrEqual(6);
    expect(done.length).toBeLessThanOrEqual(8);
    expect(queue.length).toBe(10 - done.length);
  });
});
