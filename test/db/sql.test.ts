import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertUsageRecords } from '../../src/jobs/outcomes/store.ts';
import { toStatement } from '../../src/db/sql.ts';
import { buildTestApp, client, seedProject, type TestApp } from '../helpers/app.ts';
import { testOutcome } from '../helpers/outcomes.ts';
import { uniqueName } from '../helpers/services.ts';

// The driver under Prisma (db/sql.ts), which the outcome writer's batches run on: PostgreSQL's pool with DATABASE_URL,
// the embedded PGlite without it.
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(() => t.close());

async function aKey() {
  const operator = client(t.app);
  const { projectId } = await seedProject(operator);
  const key = await operator.post('/v1/keys', { project_id: projectId, name: uniqueName('k'), scopes: ['inference:write'] });
  return { projectId, keyId: key.body.id as string };
}

describe('the direct SQL driver', () => {
  it('numbers a template literal\'s values as parameters, never splicing them into the text', () => {
    const tag = (s: TemplateStringsArray, ..._v: unknown[]) => toStatement(s);
    expect(tag`SELECT ${1} WHERE a = ${"'; DROP TABLE x; --"}`).toBe('SELECT $1 WHERE a = $2');
  });

  it('rolls the whole transaction back when a later statement fails, and serves the next transaction', async () => {
    const { projectId, keyId } = await aKey();
    const o = testOutcome(projectId, keyId, new Date(t.clock.now()));
    await expect(
      t.deps.database.sql.transaction(async (tx) => {
        expect(await insertUsageRecords(tx, [o])).toEqual(new Set([o.requestId]));
        await tx.$queryRaw`SELECT 1 / ${0}::int`;
      }),
    ).rejects.toThrow(/division by zero/);
    expect(await t.deps.db.usageRecord.count({ where: { requestId: o.requestId } })).toBe(0);

    const written = await t.deps.database.sql.transaction(async (tx) => {
      const fresh = await insertUsageRecords(tx, [o]);
      const again = await insertUsageRecords(tx, [o]);
      const updated = await tx.$executeRaw`UPDATE usage_records SET latency_ms = ${7} WHERE request_id = ${o.requestId}`;
      return { fresh, again, updated };
    });
    expect(written).toEqual({ fresh: new Set([o.requestId]), again: new Set(), updated: 1 });
    expect(await t.deps.db.usageRecord.findUnique({ where: { requestId: o.requestId } })).toMatchObject({ latencyMs: 7, projectId });
  });

  it('rolls back when the callback throws after its statements succeeded', async () => {
    const { projectId, keyId } = await aKey();
    const o = testOutcome(projectId, keyId, new Date(t.clock.now()));
    await expect(
      t.deps.database.sql.transaction(async (tx) => {
        await insertUsageRecords(tx, [o]);
        throw new Error('stopped by the caller');
      }),
    ).rejects.toThrow('stopped by the caller');
    expect(await t.deps.db.usageRecord.count({ where: { requestId: o.requestId } })).toBe(0);
  });
});
