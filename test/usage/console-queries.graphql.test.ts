import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/db/ids.ts';
import { FakeClock } from '../helpers/clock.ts';
import { buildTestApp, client, createTestDatabase, seedProject, type Client, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';

/** The console's Requests and Spend queries (requestLog, requestDetail, spend): what they answer and refuse. */
let db: TestDatabase;
let t: TestApp;
// Every SQL statement Prisma sends, in order.
let statements: string[] = [];
let operator: Client;
let gql: Gql;
let a: { projectId: string; keyId: string; secret: string };
let b: { projectId: string; keyId: string; secret: string };
const DAY = 86_400_000;
const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
let now: number;
const ids: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase({ log: true });
  db.database.prisma.$on('query' as never, (e: { query: string }) => statements.push(e.query));
  // Noon (UTC) today: the records an hour before `now` stay on their day whatever the time the tests run.
  t = await buildTestApp({ database: db, clock: new FakeClock(Math.floor(Date.now() / DAY) * DAY + 12 * 3_600_000) });
  operator = client(t.app);
  gql = gqlClient(t.app);
  a = await seedProject(operator, { scopes: ['usage:read', 'inference:write'] });
  b = await seedProject(operator, { scopes: ['usage:read', 'inference:write'] });
  now = t.clock.now();
  // Project a: days 0..4 ago, three records a day: key a / model m1 (1000 µ$), key x / model m2 (500 µ$, customer c1),
  // and a failed one of m1 with no route (0 µ$). Project b: one record.
  const rows = [];
  for (let d = 4; d >= 0; d--) {
    const at = (i: number) => new Date(now - d * DAY - 3_600_000 + i * 1000);
    const id = (i: number) => newId('req', at(i).getTime());
    const r = [
      { requestId: id(0), keyId: a.keyId, model: 'm1', route: 'p/m1', status: 'succeeded', errorCode: null, costMicros: 1000n, cacheHit: false, customer: null, createdAt: at(0) },
      { requestId: id(1), keyId: 'key_x', model: 'm2', route: 'p/m2', status: 'succeeded', errorCode: null, costMicros: 500n, cacheHit: d === 0, customer: 'c1', createdAt: at(1) },
      { requestId: id(2), keyId: a.keyId, model: 'm1', route: null, status: 'failed', errorCode: 'model_unavailable', costMicros: 0n, cacheHit: false, customer: null, createdAt: at(2) },
    ];
    for (const x of r) {
      ids.push(x.requestId);
      rows.push({ ...x, projectId: a.projectId, region: 'eu', promptTokens: 10, completionTokens: 5, latencyMs: 42 });
    }
  }
  rows.push({ requestId: newId('req', now), projectId: b.projectId, keyId: b.keyId, model: 'm1', route: 'p/m1', region: 'eu', status: 'succeeded', errorCode: null, costMicros: 7n, cacheHit: false, customer: null, promptTokens: 1, completionTokens: 1, latencyMs: 1, createdAt: new Date(now) });
  await t.deps.db.usageRecord.createMany({ data: rows });
}, 120_000);
afterAll(async () => {
  await t?.close();
  await db?.drop();
});

const LOG = `query L($p: ID, $first: Int, $after: String, $model: String, $keyId: ID, $status: String, $cacheHit: Boolean, $route: String, $customer: String, $gte: UnixSeconds, $lt: UnixSeconds) {
  requestLog(projectId: $p, first: $first, after: $after, model: $model, keyId: $keyId, status: $status, cacheHit: $cacheHit, route: $route, customer: $customer, createdGte: $gte, createdLt: $lt) {
    edges { node { requestId model keyId status errorCode cacheHit costUsd } } pageInfo { hasNextPage endCursor }
  }
}`;
const DETAIL = `query D($id: ID!) { requestDetail(requestId: $id) { inferenceId contentRetained record { requestId status } timeline { step status detail atMs } } }`;
const SPEND = `query S($p: ID, $by: String, $s: String, $e: String, $top: Int) {
  spend(projectId: $p, by: $by, startDate: $s, endDate: $e, top: $top) {
    by startDate endDate otherValues cells { date value requests costUsd } values { value requests promptTokens completionTokens costUsd } totals { value requests costUsd }
  }
}`;

describe('requestLog', () => {
  it('lists the project\'s requests newest first, paged by request id', async () => {
    const first = await gql(LOG, { first: 10 }, { key: a.secret });
    const edges = first.body.data.requestLog.edges;
    expect(edges.map((e: { node: { requestId: string } }) => e.node.requestId)).toEqual([...ids].reverse().slice(0, 10));
    expect(first.body.data.requestLog.pageInfo.hasNextPage).toBe(true);
    const next = await gql(LOG, { first: 10, after: first.body.data.requestLog.pageInfo.endCursor }, { key: a.secret });
    expect(next.body.data.requestLog.edges.map((e: { node: { requestId: string } }) => e.node.requestId)).toEqual([...ids].reverse().slice(10));
    expect(next.body.data.requestLog.pageInfo.hasNextPage).toBe(false);
  });

  it('filters by model, key, status, cache hit, route, customer and time', async () => {
    const count = async (vars: Record<string, unknown>) => {
      const res = await gql(LOG, { first: 100, ...vars }, { key: a.secret });
      expect(res.body.errors, res.raw).toBeUndefined();
      return res.body.data.requestLog.edges.map((e: { node: unknown }) => e.node);
    };
    expect(await count({ model: 'm2' })).toHaveLength(5);
    expect(await count({ keyId: a.keyId })).toHaveLength(10);
    const failed = await count({ status: 'failed' });
    expect(failed).toHaveLength(5);
    expect(failed[0]).toMatchObject({ status: 'failed', errorCode: 'model_unavailable', costUsd: 0 });
    expect(await count({ cacheHit: true })).toHaveLength(1);
    expect(await count({ route: 'p/m1' })).toHaveLength(5);
    expect(await count({ customer: 'c1' })).toHaveLength(5);
    const since = Math.floor((now - DAY - 2 * 3_600_000) / 1000);
    expect(await count({ gte: since })).toHaveLength(6);
    expect(await count({ gte: since, lt: Math.floor((now - 2 * 3_600_000) / 1000) })).toHaveLength(3);
  });

  it('refuses a bad filter naming it', async () => {
    expectGqlError(await gql(LOG, { status: 'maybe' }, { key: a.secret }), 'invalid_request', { param: 'status', httpStatus: 400 });
    expectGqlError(await gql(LOG, { gte: 2000, lt: 1000 }, { key: a.secret }), 'invalid_request', { param: 'created_lt' });
    expectGqlError(await gql(LOG, { first: 101 }, { key: a.secret }), 'invalid_request', { param: 'first' });
    expectGqlError(await gql(LOG, { after: 'req_nope' }, { key: a.secret }), 'invalid_request', { param: 'after' });
  });

  it('shows a key only its own project; the operator any project it names', async () => {
    const own = await gql(LOG, { p: a.projectId, first: 100 }, { key: b.secret });
    expect(own.body.data?.requestLog ?? null).toBeNull();
    expectGqlError(own, 'not_found', { param: 'project_id' });
    const op = await gql(LOG, { p: b.projectId, first: 100 });
    expect(op.body.data.requestLog.edges).toHaveLength(1);
  });
});

describe('requestDetail', () => {
  it('tells a succeeded request\'s way: received, authenticated, limits, cache, provider, outcome', async () => {
    const res = await gql(DETAIL, { id: ids[0] }, { key: a.secret });
    const d = res.body.data.requestDetail;
    expect(d.record).toEqual({ requestId: ids[0], status: 'succeeded' });
    expect(d.inferenceId).toBeNull();
    expect(d.contentRetained).toBe(false);
    expect(d.timeline.map((s: { step: string; status: string }) => `${s.step}:${s.status}`)).toEqual([
      'received:ok', 'authenticated:ok', 'limits:ok', 'cache:skipped', 'provider:ok', 'outcome:ok',
    ]);
    expect(d.timeline.at(-1).atMs - d.timeline[0].atMs).toBe(42);
    expect(d.timeline[4].detail).toBe('Answered by p/m1 in eu.');
  });

  it('says where a failed request stopped', async () => {
    const res = await gql(DETAIL, { id: ids[2] }, { key: a.secret });
    expect(res.body.data.requestDetail.timeline.map((s: { step: string; status: string }) => `${s.step}:${s.status}`)).toEqual([
      'received:ok', 'authenticated:ok', 'limits:ok', 'cache:skipped', 'provider:failed', 'outcome:failed',
    ]);
    expect(res.body.data.requestDetail.timeline[5].detail).toBe('Failed with model_unavailable after 42 ms.');
  });

  it('links the retained content of a real inference', async () => {
    const c = await seedProject(operator, { scopes: ['usage:read', 'inference:write'] });
    const inf = await client(t.app, c.secret).post('/v1/inference', { model: 'mock-1', project_id: c.projectId, messages: [{ role: 'user', content: 'hello' }] });
    expect(inf.status).toBe(200);
    const res = await gql(DETAIL, { id: inf.body.request_id }, { key: c.secret });
    expect(res.body.data.requestDetail).toMatchObject({ inferenceId: inf.body.id, contentRetained: true });
  });

  it("answers not_found for another project's request and for an unknown one", async () => {
    await expectGqlHiddenFrom(gql, b.secret, [{ field: 'requestDetail', query: DETAIL, variables: { id: ids[0] } }]);
    expectGqlError(await gql(DETAIL, { id: 'req_unknown' }, { key: a.secret }), 'not_found', { param: 'request_id', httpStatus: 404 });
  });
});

describe('spend', () => {
  it('sums per day and key in SQL, with per-key and overall totals', async () => {
    const res = await gql(SPEND, { s: day(now - 4 * DAY), e: day(now) }, { key: a.secret });
    const s = res.body.data.spend;
    expect(s).toMatchObject({ by: 'key', startDate: day(now - 4 * DAY), endDate: day(now) });
    expect(s.cells).toHaveLength(10);
    expect(s.cells[0]).toEqual({ date: day(now - 4 * DAY - 3_600_000), value: a.keyId, requests: 2, costUsd: 0.001 });
    expect(s.values).toEqual([
      { value: a.keyId, requests: 10, promptTokens: 100, completionTokens: 50, costUsd: 0.005 },
      { value: 'key_x', requests: 5, promptTokens: 50, completionTokens: 25, costUsd: 0.0025 },
    ]);
    expect(s.totals).toEqual({ value: null, requests: 15, costUsd: 0.0075 });
  });

  it('splits by model, customer, route and status', async () => {
    const by = async (dim: string) => (await gql(SPEND, { by: dim, s: day(now - 10 * DAY), e: day(now) }, { key: a.secret })).body.data.spend.values.map((v: { value: string; requests: number }) => [v.value, v.requests]);
    expect(await by('model')).toEqual([['m1', 10], ['m2', 5]]);
    expect(await by('customer')).toEqual([['', 10], ['c1', 5]]);
    expect(await by('route')).toEqual([['p/m1', 5], ['p/m2', 5], ['', 5]]);
    expect(await by('status')).toEqual([['succeeded', 10], ['failed', 5]]);
  });

  it('keeps the costliest values with top and sums the others as one, value null', async () => {
    const res = await gql(SPEND, { by: 'customer', top: 1, s: day(now - 4 * DAY), e: day(now) }, { key: a.secret });
    const s = res.body.data.spend;
    expect(s.otherValues).toBe(1);
    expect(s.values.map((v: { value: string | null; requests: number }) => [v.value, v.requests])).toEqual([['', 10], [null, 5]]);
    expect(s.cells).toHaveLength(10);
    expect(s.cells.filter((c: { value: string | null }) => c.value === null)).toHaveLength(5);
    expect(s.totals).toEqual({ value: null, requests: 15, costUsd: 0.0075 });
    const all = await gql(SPEND, { by: 'customer', top: 5, s: day(now - 4 * DAY), e: day(now) }, { key: a.secret });
    expect(all.body.data.spend.otherValues).toBe(0);
    expect(all.body.data.spend.values.map((v: { value: string | null }) => v.value)).toEqual(['', 'c1']);
    expectGqlError(await gql(SPEND, { top: 0 }, { key: a.secret }), 'invalid_request', { param: 'top' });
    expectGqlError(await gql(SPEND, { top: 101 }, { key: a.secret }), 'invalid_request', { param: 'top' });
  });

  it('reads one statement of the daily sums, never the usage records', async () => {
    statements = [];
    const res = await gql(SPEND, { by: 'model' }, { key: a.secret });
    expect(res.body.data.spend.values).toHaveLength(2);
    expect(statements.filter((q) => /usage_records/.test(q))).toEqual([]);
    const daily = statements.filter((q) => /usage_daily/.test(q));
    expect(daily).toHaveLength(1);
    expect(daily[0]).toMatch(/WHERE dimension = \$1 AND day >= \$2::date AND day < \$3::date AND project_id = \$4\s+GROUP BY day, value/);
  });

  it('counts a usage record written twice once (the dedup trigger skips it before the daily sums see it)', async () => {
    const c = await seedProject(operator, { scopes: ['usage:read'] });
    const row = { requestId: newId('req', now), projectId: c.projectId, keyId: c.keyId, model: 'm9', route: 'p/m9', region: 'eu', status: 'succeeded', errorCode: null, costMicros: 250n, cacheHit: false, customer: 'c9', promptTokens: 3, completionTokens: 4, latencyMs: 5, createdAt: new Date(now) };
    await t.deps.db.usageRecord.createMany({ data: [row] });
    await t.deps.db.usageRecord.createMany({ data: [row] });
    for (const by of ['key', 'model', 'customer', 'route', 'status']) {
      const res = await gql(SPEND, { by }, { key: c.secret });
      expect(res.body.data.spend.totals, by).toEqual({ value: null, requests: 1, costUsd: 0.00025 });
    }
  });

  it('refuses a bad dimension or range naming the field', async () => {
    expectGqlError(await gql(SPEND, { by: 'colour' }, { key: a.secret }), 'invalid_request', { param: 'by', httpStatus: 400 });
    expectGqlError(await gql(SPEND, { s: '2026-02-30' }, { key: a.secret }), 'invalid_request', { param: 'start_date' });
    expectGqlError(await gql(SPEND, { s: '2026-03-02', e: '2026-03-01' }, { key: a.secret }), 'invalid_request', { param: 'end_date' });
    expectGqlError(await gql(SPEND, { s: '2020-01-01', e: '2026-01-01' }, { key: a.secret }), 'invalid_request', { param: 'start_date' });
  });

  it('keeps projects apart', async () => {
    const res = await gql(SPEND, { s: day(now - 4 * DAY), e: day(now) }, { key: b.secret });
    expect(res.body.data.spend.totals).toEqual({ value: null, requests: 1, costUsd: 0.000007 });
    expectGqlError(await gql(SPEND, { p: a.projectId }, { key: b.secret }), 'not_found', { param: 'project_id' });
  });
});

describe('scopes', () => {
  it('needs usage:read for all three', async () => {
    const narrow = await operator.post('/v1/keys', { project_id: a.projectId, name: 'no-usage', scopes: ['inference:write'] });
    await expectGqlScopeRequired(gql, narrow.body.secret, [
      { field: 'requestLog', query: LOG },
      { field: 'requestDetail', query: DETAIL, variables: { id: ids[0] } },
      { field: 'spend', query: SPEND },
    ]);
  });
});
