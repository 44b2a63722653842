import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_URL, uniqueName } from '../helpers/services.ts';
import { DirectSession } from '../../src/db/direct-session.ts';
import { AdvisoryLeadership } from '../../src/db/leadership.ts';

// CI=1 runs with DATABASE_URL (.ci/run): there this never skips.
const needsPostgres = !DATABASE_URL && process.env.CI !== '1';

/**
 * The direct session is one pg client shared by every sweep's leadership check and the delivery worker's LISTEN.
 * pg deprecates a query on a client that is still running one (a DeprecationWarning under load, an error in pg 9):
 * the session must run its statements one at a time. Every pg client query is watched for a queue behind it.
 */
describe.skipIf(needsPostgres)('the direct session runs one statement at a time', () => {
  const overlapping: string[] = [];
  const warnings: string[] = [];
  const original = pg.Client.prototype.query;
  const onWarning = (w: Error) => {
    if (w.name === 'DeprecationWarning' && /already executing a query/.test(w.message)) warnings.push(w.message);
  };
  let session: DirectSession;

  beforeAll(() => {
    pg.Client.prototype.query = function (this: pg.Client & { _queryQueue: unknown[] }, ...args: unknown[]) {
      // pg's own condition for the deprecation (client.js): a query already queued on this client.
      if (this._queryQueue.length > 0) overlapping.push(String(typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string })?.text));
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof original;
    process.on('warning', onWarning);
    session = new DirectSession(DATABASE_URL!, { warn: () => {} });
  }, 60_000);

  afterEach(() => {
    overlapping.length = 0;
    warnings.length = 0;
  });

  afterAll(async () => {
    pg.Client.prototype.query = original;
    process.off('warning', onWarning);
    await session?.close();
  }, 60_000);

  it('serializes concurrent leadership checks, statements and steps on its one connection', async () => {
    const leadership = new AdvisoryLeadership(session, uniqueName('direct_session'));
    const channel = uniqueName('direct_session_wake');
    // Sweeps ticking at the same moment, a LISTEN step added meanwhile, and plain statements.
    const [leads, remove, rows] = await Promise.all([
      Promise.all(['retention', 'approvals', 'summaries', 'partitions', 'budgets'].map((name) => leadership.lead(name))),
      session.addStep((client) => client.query(`LISTEN ${channel}`)),
      Promise.all([1, 2, 3].map((n) => session.query<{ n: number }>('SELECT $1::int AS n', [n]))),
    ]);
    expect(leads).toEqual([true, true, true, true, true]);
    expect(rows.map((r) => r[0]!.n)).toEqual([1, 2, 3]);
    // Each held lead checks its connection on the next tick: again all at once.
    expect(await Promise.all(['retention', 'approvals', 'summaries'].map((name) => leadership.lead(name)))).toEqual([true, true, true]);
    await Promise.all([leadership.release('retention'), leadership.release('approvals'), remove()]);
    expect(overlapping).toEqual([]);
    expect(warnings).toEqual([]);
  }, 60_000);

  it('a failed statement does not stop the ones queued behind it', async () => {
    const results = await Promise.allSettled([session.query('SELECT nonexistent_column_x'), session.query<{ ok: number }>('SELECT 1 AS ok')]);
    expect(results[0]!.status).toBe('rejected');
    expect(results[1]).toEqual({ status: 'fulfilled', value: [{ ok: 1 }] });
    expect(overlapping).toEqual([]);
  }, 60_000);
});
