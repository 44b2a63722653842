/**
 * node --import tsx scripts/seed-usage.ts [--rows 1000000] [--days 90] [--keys 20] [--project prj_…] [--measure] [--runs 21]
 *
 * (--rows 0 --project prj_… --measure: measures a project seeded before.)
 *
 * Fills usage_records of one project with `rows` usage records spread evenly over the last `days` days (newest now),
 * the way the console's Requests and Spend screens see real traffic: 20 keys, 6 models on 3 providers with their
 * prices, 500 end customers on 70% of the requests, 2% failures, 10% cache hits. One INSERT … SELECT FROM
 * generate_series per 250,000 rows (ids, times and figures are computed in SQL; nothing crosses the wire per row), then
 * ANALYZE. With --measure it then times each screen's GraphQL queries through the gateway itself (buildApp, in process,
 * app.inject) and prints the p50 and p95 per screen load.
 *
 * DATABASE_URL (PostgreSQL) is required; use a database of its own (it is migrated first): the project and keys it
 * creates stay there. Without --project a new project "usage-seed" is created, with limits that do not bind.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { buildApp } from '../src/api/app.ts';
import { closeDeps, createDeps } from '../src/app-deps.ts';
import { loadConfig } from '../src/config/config.ts';

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    days: { type: 'string', default: '90' },
    keys: { type: 'string', default: '20' },
    project: { type: 'string' },
    measure: { type: 'boolean', default: false },
    runs: { type: 'string', default: '21' },
  },
});

const url = process.env.DATABASE_URL;
if (!url?.startsWith('postgres')) {
  console.error('seed-usage: DATABASE_URL must name a PostgreSQL database (e.g. postgresql://postgres@127.0.0.1:5432/usage_seed)');
  process.exit(2);
}
const rows = Number(args.rows);
const days = Number(args.days);
const keyCount = Number(args.keys);
const runs = Number(args.runs);
for (const [name, v] of [['rows', rows], ['days', days], ['keys', keyCount], ['runs', runs]] as const) {
  if (!Number.isInteger(v) || v < (name === 'rows' ? 0 : 1)) {
    console.error(`seed-usage: --${name} must be a positive integer`);
    process.exit(2);
  }
}

const MASTER = `svc_sk_${randomBytes(30).toString('hex')}`;
const config = loadConfig({ ...process.env, DATABASE_URL: url, SVC_MASTER_KEY: MASTER, LOG_LEVEL: 'warn' });
const deps = await createDeps(config);
const app = await buildApp(deps);
await app.ready();

async function call(method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown) {
  const res = await app.inject({ method, url: path, headers: { authorization: `Bearer ${MASTER}` }, ...(body !== undefined ? { payload: body as object } : {}) });
  const json = JSON.parse(res.body);
  if (res.statusCode !== 200) throw new Error(`${method} ${path}: ${res.statusCode} ${res.body}`);
  return json;
}

async function graphql(query: string, variables: Record<string, unknown>) {
  const res = await app.inject({ method: 'POST', url: '/graphql', headers: { authorization: `Bearer ${MASTER}` }, payload: { query, variables } });
  const json = JSON.parse(res.body);
  if (json.errors) throw new Error(`graphql: ${JSON.stringify(json.errors)}`);
  return json.data;
}

let projectId = args.project;
if (!projectId) {
  const project = await call('POST', '/v1/projects', { name: 'usage-seed', plan: 'enterprise' });
  projectId = project.id as string;
  await call('PUT', `/v1/projects/${projectId}/rate-limits`, { requests_per_minute: 1_000_000, tokens_per_minute: 1_000_000_000, burst: 0 });
  await call('PUT', `/v1/projects/${projectId}/budget`, { budget_usd: 25_000 });
}
const keyIds: string[] = [];
for (let i = 0; i < (rows > 0 ? keyCount : 0); i++) {
  const key = await call('POST', '/v1/keys', { project_id: projectId, name: `seed-${i}-${randomBytes(3).toString('hex')}`, scopes: ['inference:write', 'usage:read'] });
  keyIds.push(key.id);
}

// [model, route, region, $ per million input tokens, $ per million output tokens]
const MODELS = [
  ['gpt-4o', 'openai/gpt-4o', 'us-east-1', 2.5, 10],
  ['gpt-4o-mini', 'openai/gpt-4o-mini', 'us-east-1', 0.15, 0.6],
  ['claude-sonnet', 'anthropic/claude-sonnet', 'eu-west-1', 3, 15],
  ['claude-haiku', 'anthropic/claude-haiku', 'eu-west-1', 0.8, 4],
  ['llama-3-70b', 'local/llama-3-70b', 'eu-west-1', 0.6, 0.6],
  ['mistral-small', 'local/mistral-small', 'eu-west-1', 0.2, 0.6],
] as const;
const sqlArray = (xs: readonly (string | number)[]) => `ARRAY[${xs.map((x) => (typeof x === 'number' ? String(x) : `'${x}'`)).join(',')}]`;

const pool = new pg.Pool({ connectionString: url, max: 1 });
const nowMs = Date.now();
const spanMs = days * 86_400_000;
const CHUNK = 250_000;
const started = performance.now();
// The id is made as newId makes one: 10 base32 characters of the millisecond, 16 of (here deterministic) randomness,
// so ids sort as their times do and the (project_id, request_id) index serves the newest-first log.
const b32 = (expr: string, n: number) =>
  `(SELECT string_agg(substr('0123456789abcdefghjkmnpqrstvwxyz', ((${expr} >> (5 * (${n - 1} - i))) & 31)::int + 1, 1), '' ORDER BY i) FROM generate_series(0, ${n - 1}) i)`;
for (let from = 1; from <= rows; from += CHUNK) {
  const to = Math.min(rows, from + CHUNK - 1);
  const t0 = performance.now();
  await pool.query(`
    INSERT INTO usage_records (request_id, project_id, key_id, model, route, region, cache_hit, status, error_code,
                               prompt_tokens, completion_tokens, cost_micros, latency_ms, created_at, customer)
    SELECT 'req_' || ${b32('x.ms', 10)} || ${b32('x.g', 16)},
           $1, x.keys[1 + x.h % array_length(x.keys, 1)],
           x.models[x.m], x.routes[x.m], x.regions[x.m],
           x.h % 10 = 0, CASE WHEN x.h % 50 = 7 THEN 'failed' ELSE 'succeeded' END,
           CASE WHEN x.h % 50 = 7 THEN 'provider_error' END,
           x.prompt, CASE WHEN x.h % 50 = 7 THEN 0 ELSE x.completion END,
           CASE WHEN x.h % 50 = 7 OR x.h % 10 = 0 THEN 0
                ELSE (x.prompt * x.inp[x.m] + x.completion * x.outp[x.m])::bigint END,
           80 + x.h % 2400, to_timestamp(x.ms / 1000.0),
           CASE WHEN x.h % 10 < 7 THEN 'cus_' || (x.h % 500) END
      FROM (SELECT g::bigint AS g,
                   ($2::bigint - (g::bigint * $3::bigint) / $4::bigint) AS ms,
                   abs(hashint8(g::bigint)) AS h,
                   1 + abs(hashint8(g::bigint * 31)) % ${MODELS.length} AS m,
                   50 + abs(hashint8(g::bigint * 17)) % 3000 AS prompt,
                   10 + abs(hashint8(g::bigint * 13)) % 800 AS completion,
                   $5::text[] AS keys,
                   ${sqlArray(MODELS.map((m) => m[0]))} AS models,
                   ${sqlArray(MODELS.map((m) => m[1]))} AS routes,
                   ${sqlArray(MODELS.map((m) => m[2]))} AS regions,
                   ${sqlArray(MODELS.map((m) => m[3]))}::numeric[] AS inp,
                   ${sqlArray(MODELS.map((m) => m[4]))}::numeric[] AS outp
              FROM generate_series($6::bigint, $7::bigint) g) x`,
    [projectId, nowMs, spanMs, rows, keyIds, from, to],
  );
  console.log(`seed-usage: rows ${from}-${to} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
await pool.query('ANALYZE usage_records');
await pool.query('ANALYZE usage_request_ids');
await pool.query('ANALYZE usage_daily');
console.log(`seed-usage: ${rows.toLocaleString('en-US')} usage records in project ${projectId} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
await pool.end();

if (args.measure) {
  const FIG = 'requests promptTokens completionTokens costUsd';
  const ROW = 'requestId keyId model route region cacheHit status errorCode promptTokens completionTokens costUsd latencyMs createdAt';
  const today = new Date(nowMs).toISOString().slice(0, 10);
  const monthAgo = new Date(nowMs - 29 * 86_400_000).toISOString().slice(0, 10);
  const quarterAgo = new Date(nowMs - 89 * 86_400_000).toISOString().slice(0, 10);
  // The Spend screen asks for the 7 costliest values (the rest summed as one); its CSV export for all of them.
  const spend = (by: string, start: string, top: number | null = 7) => () =>
    graphql(`query S($p: ID, $by: String, $s: String, $e: String, $top: Int) { spend(projectId: $p, by: $by, startDate: $s, endDate: $e, top: $top) { by otherValues cells { date value ${FIG} } values { value ${FIG} } totals { ${FIG} } } }`, { p: projectId, by, s: start, e: today, top });
  const log = (filters: Record<string, unknown>) => () =>
    graphql(`query L($p: ID, $model: String, $status: String, $keyId: ID, $customer: String) { requestLog(projectId: $p, first: 25, model: $model, status: $status, keyId: $keyId, customer: $customer) { edges { node { ${ROW} } } pageInfo { hasNextPage endCursor } } }`, { p: projectId, ...filters });
  const budget = () => graphql(`query B($id: ID!) { budget(projectId: $id) { budgetUsd spentUsd period } }`, { id: projectId });
  const keys = () => graphql(`query K($p: ID) { keys(projectId: $p, first: 100) { edges { node { id name budgetUsd } } } }`, { p: projectId });
  const first = (await log({})())?.requestLog.edges[0].node.requestId as string;
  if (keyIds.length === 0) keyIds.push(...(await graphql(`query K($p: ID) { keys(projectId: $p, first: 20) { edges { node { id } } } }`, { p: projectId })).keys.edges.map((e: { node: { id: string } }) => e.node.id));
  const detail = () => graphql(`query D($id: ID!) { requestDetail(requestId: $id) { record { requestId } timeline { step } } }`, { id: first });

  // A screen load is the queries the screen sends together when it opens (the console sends them in parallel).
  const screens: [string, (() => Promise<unknown>)[]][] = [
    ['Requests (first page, no filter)', [log({})]],
    ['Requests filtered by model', [log({ model: 'claude-haiku' })]],
    ['Requests filtered by key', [log({ keyId: keyIds[3] })]],
    ['Requests filtered by customer', [log({ customer: 'cus_42' })]],
    ['Requests filtered by status=failed', [log({ status: 'failed' })]],
    ['Request detail', [detail]],
    ['Spend by key, 30 days (+ budget, key names)', [spend('key', monthAgo), budget, keys]],
    ['Spend by model, 30 days', [spend('model', monthAgo)]],
    ['Spend by customer, 30 days', [spend('customer', monthAgo)]],
    ['Spend by key, 90 days', [spend('key', quarterAgo)]],
    ['CSV export by customer, 30 days (every value)', [spend('customer', monthAgo, null)]],
  ];
  const results: Record<string, { p50_ms: number; p95_ms: number }> = {};
  for (const [name, queries] of screens) {
    const times: number[] = [];
    for (let i = 0; i < runs + 2; i++) {
      const t0 = performance.now();
      await Promise.all(queries.map((q) => q()));
      if (i >= 2) times.push(performance.now() - t0); // two warm-up loads
    }
    times.sort((a, b) => a - b);
    const at = (p: number) => Math.round(times[Math.min(times.length - 1, Math.floor(p * times.length))]! * 10) / 10;
    results[name] = { p50_ms: at(0.5), p95_ms: at(0.95) };
    console.log(`seed-usage: ${name}: p50 ${at(0.5)} ms, p95 ${at(0.95)} ms (${runs} loads)`);
  }
  console.log(JSON.stringify({ rows, days, project_id: projectId, results }, null, 2));
}

await app.close();
await closeDeps(deps);
