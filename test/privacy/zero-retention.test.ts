import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, createTestDatabase, seedProject, type Client, type TestApp, type TestDatabase } from '../helpers/app.ts';

// CONTRACT §12 zero retention: no prompt or answer text anywhere the gateway writes: every text of every table in
// PostgreSQL (or the embedded database), every key and value under the app's Redis prefix, and every log line.
// What the gateway seals (idempotent answers, retained content, outcome entries) is opened with its own key and
// searched too. A standard-retention project run the same way is the control: its marker is found, so the search can
// fail.

let db: TestDatabase;
let t: TestApp;
let operator: Client;

beforeAll(async () => {
  db = await createTestDatabase();
  // The deadline is tested with an injected clock (privacy.rest.test.ts); a loaded machine must not trip the real one.
  t = await buildTestApp({ database: db, env: { SVC_PII_TIMEOUT_MS: '10000' } });
  operator = client(t.app);
}, 120_000);
afterAll(async () => {
  await t.close();
  await db.drop();
});

/** Every row of every table of the app's schema, as JSON text. */
async function databaseText(): Promise<string> {
  const tables = await t.deps.db.$queryRawUnsafe<{ name: string }[]>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`,
  );
  expect(tables.map((x) => x.name)).toEqual(expect.arrayContaining(['usage_records', 'retained_inferences', 'idempotency_records', 'events']));
  const parts: string[] = [];
  for (const { name } of tables) {
    const rows = await t.deps.db.$queryRawUnsafe<{ row: string }[]>(`SELECT row_to_json(x)::text AS row FROM "${name}" x`);
    for (const r of rows) parts.push(r.row);
  }
  // Sealed values, opened with the gateway's key: idempotent answers and retained content.
  const open = (sealed: string, aad: string) => t.deps.webhooks.secretBox.open(sealed, aad);
  const idem = await t.deps.db.idempotencyRecord.findMany({ where: { responseBody: { not: null } } });
  for (const r of idem) parts.push(open(r.responseBody!, `${r.scope}\n${r.key}`));
  for (const r of await t.deps.db.retainedInference.findMany({ where: { sealed: { not: null } } })) parts.push(open(r.sealed!, r.id));
  return parts.join('\n');
}

/** Every key and value under the app's Redis prefix (empty without Redis), sealed values opened. */
async function redisText(): Promise<string> {
  const redis = t.deps.redis;
  if (!redis) return '';
  const parts: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${t.config.redisPrefix}*`, 'COUNT', 500);
    cursor = next;
    for (const key of keys) {
      parts.push(key);
      const type = await redis.type(key);
      if (type === 'string') {
        const value = (await redis.get(key)) ?? '';
        parts.push(value);
        const idem = /idem:\{([^}]*)\}:(.*)$/.exec(key);
        const body = idem ? (JSON.parse(value) as { body?: string }).body : undefined;
        if (idem && body) parts.push(t.deps.webhooks.secretBox.open(body, `${idem[1]}\n${idem[2]}`));
      }
      else if (type === 'hash') parts.push(JSON.stringify(await redis.hgetall(key)));
      else if (type === 'list') parts.push(JSON.stringify(await redis.lrange(key, 0, -1)));
      else if (type === 'set') parts.push(JSON.stringify(await redis.smembers(key)));
      else if (type === 'zset') parts.push(JSON.stringify(await redis.zrange(key, '0', '-1')));
      else if (type === 'stream') {
        const entries = JSON.stringify(await redis.xrange(key, '-', '+'));
        parts.push(entries);
        // Outcome entries carry the retained content sealed to the inference id.
        for (const m of entries.matchAll(/\\"inferenceId\\":\\"(inf_[0-9a-z]+)\\",\\"status\\":\\"\w+\\",\\"sealed\\":\\"([\w.-]+)\\"/g)) {
          parts.push(t.deps.webhooks.secretBox.open(m[2]!, m[1]!));
        }
      }
    }
  } while (cursor !== '0');
  return parts.join('\n');
}

/** The same traffic: plain, cached, streamed, idempotent, OpenAI-shaped, Responses API, PII-redacted. */
async function traffic(api: Client, projectId: string, marker: string) {
  const messages = [{ role: 'user', content: `secret plan ${marker} for today` }];
  const calls = [
    () => api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages }),
    () => api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages, cache: true }, { headers: { 'idempotency-key': `k-${marker.slice(0, 5)}` } }),
    () => api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages, cache: true }, { headers: { 'idempotency-key': `k-${marker.slice(0, 5)}` } }),
    () => api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages, stream: true }, { headers: { 'idempotency-key': `s-${marker.slice(0, 5)}` } }),
    () => api.post('/v1/chat/completions', { model: 'mock-1', messages, pii: { redact: true, restore: true } }, { headers: { 'idempotency-key': `c-${marker.slice(0, 5)}` } }),
    () => api.post('/v1/responses', { model: 'mock-1', input: `secret plan ${marker} again` }),
  ];
  for (const c of calls) {
    const res = await c();
    expect([200, 404], JSON.stringify(res.body)).toContain(res.status);
  }
  await t.deps.outcomes.flush();
}

describe('zero retention', () => {
  it('leaves no prompt or answer text in the database, Redis or the logs', async () => {
    const zero = await seedProject(operator, { scopes: ['inference:write', 'inference:read', 'governance:manage'] });
    const standard = await seedProject(operator, { scopes: ['inference:write', 'inference:read', 'governance:manage'] });
    const api = client(t.app, zero.secret);
    expect((await api.put(`/v1/projects/${zero.projectId}/retention`, { mode: 'zero' })).status).toBe(200);
    const zeroMarker = `ZMARK${randomBytes(6).toString('hex')}`;
    const controlMarker = `CMARK${randomBytes(6).toString('hex')}`;
    await traffic(api, zero.projectId, zeroMarker);
    await traffic(client(t.app, standard.secret), standard.projectId, controlMarker);

    const database = await databaseText();
    const redis = await redisText();
    const logs = t.logs.text;
    // The control: a standard project's answer is kept (idempotency records hold it), so the search finds it.
    expect(database).toContain(controlMarker);
    const at = database.indexOf(zeroMarker);
    expect(at, database.slice(Math.max(0, at - 600), at + 100)).toBe(-1);
    expect(redis).not.toContain(zeroMarker);
    expect(logs).not.toContain(zeroMarker);
    // The inferences are there, without content.
    const rows = await t.deps.db.retainedInference.findMany({ where: { projectId: zero.projectId } });
    expect(rows.length).toBeGreaterThanOrEqual(4);
    expect(rows.every((r) => r.sealed === null)).toBe(true);
  });
});
