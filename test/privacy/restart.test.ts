import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, createTestDatabase, seedProject, type TestDatabase } from '../helpers/app.ts';
import { uniqueName } from '../helpers/services.ts';

// CONTRACT §12: an inference answered by one process is read back by the next one over the same database (and
// Redis, when configured): the retained record is written with the outcome, flushed at shutdown, and opened with the
// same key.

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
}, 120_000);
afterAll(() => db.drop());

describe('restart', () => {
  it('loses nothing between an inference and its GET', async () => {
    const redisPrefix = `${uniqueName('restart')}:`;
    const first = await buildTestApp({ database: db, redisPrefix });
    const seeded = await seedProject(client(first.app), { scopes: ['inference:write', 'inference:read'] });
    const api = client(first.app, seeded.secret);
    // Held in the outcome queue: nothing is written until the process closes.
    first.deps.outcomes.pause();
    const answered = await api.post('/v1/inference', { project_id: seeded.projectId, model: 'mock-1', messages: [{ role: 'user', content: 'survive the restart' }] });
    expect(answered.status).toBe(200);
    expect(await first.deps.db.retainedInference.count({ where: { id: answered.body.id } })).toBe(0);
    first.deps.outcomes.resume();
    await first.close();

    const second = await buildTestApp({ database: db, redisPrefix, clock: first.clock });
    try {
      const got = await client(second.app, seeded.secret).get(`/v1/inference/${answered.body.id}`);
      expect(got.status, got.raw).toBe(200);
      expect(got.body).toEqual({
        ...answered.body,
        project_id: seeded.projectId,
        status: 'succeeded',
        request: { model: 'mock-1', messages: [{ role: 'user', content: 'survive the restart' }] },
      });
    } finally {
      await second.close();
    }
  });
});
