import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, it, onTestFailed } from 'vitest';
import { caseRequestId } from '../../src/jobs/eval-runner/runner.ts';
import { seedProject, TEST_ENCRYPTION_KEY } from '../helpers/app.ts';
import { pollUntil, startGateway, type GatewayProcess } from '../helpers/gateway-process.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { DATABASE_URL, REDIS_URL, deleteRedisPrefix, dropSchema, uniqueName, withSchema } from '../helpers/services.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';
import { EVAL_SCOPES } from './support.ts';

let provider: MockOpenAI | undefined;
let g: GatewayProcess | undefined;
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  await g?.stop('SIGKILL');
  await provider?.close();
  for (const c of cleanups) await c();
});

const CASES = 50;
/** A start compiles the sources (tsx): on a loaded machine it can take well over a minute. */
const STARTUP_MS = 180_000;

/**
 * The real gateway (api and worker in one process) killed with SIGKILL halfway through a 50-case run, then started
 * again on the same database (PostgreSQL, or the embedded one in the same data directory) and Redis: the run finishes
 * with exactly 50 results, and no case has more than one charged (succeeded) usage record.
 */
it('finishes a 50-case run killed with SIGKILL halfway, with 50 results and no case charged twice', { timeout: 600_000 }, async () => {
  provider = await startMockOpenAI({ delayMs: 60, usage: { prompt_tokens: 10, completion_tokens: 10 } });
  const file = writeProvidersFile({
    providers: [
      { name: 'priced', kind: 'openai', base_url: provider.url, region: 'eu-west-1', timeout_ms: 5000, models: [{ id: 'gpt-test', input_per_mtok: 1, output_per_mtok: 1 }] },
    ],
  });
  const env: Record<string, string> = {
    SVC_PROVIDERS_FILE: file,
    SVC_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    SVC_EVAL_LEASE_MS: '1500',
    SVC_OUTCOME_LEASE_MS: '1000',
    // A resumed call waits until one begun before the kill has surely ended (the routing timeout after it); long enough
    // that a provider call on a loaded machine does not end in routing_timeout.
    SVC_ROUTING_TIMEOUT_MS: '10000',
  };
  if (DATABASE_URL) {
    const schema = uniqueName('evalcrash');
    env.DATABASE_URL = withSchema(DATABASE_URL, schema);
    cleanups.push(() => dropSchema(DATABASE_URL!, schema));
  } else {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-evalcrash-'));
    env.SVC_DATA_DIR = dir;
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  }
  if (REDIS_URL) {
    const prefix = `${uniqueName('evalcrash')}:`;
    env.REDIS_URL = REDIS_URL;
    env.SVC_REDIS_PREFIX = prefix;
    cleanups.push(() => deleteRedisPrefix(REDIS_URL!, prefix));
  }
  g = await startGateway(env, { timeoutMs: STARTUP_MS });
  onTestFailed(() => console.error(`gateway output (tail):\n${g?.output().slice(-6_000)}`));
  const s = await seedProject(g, { scopes: EVAL_SCOPES, limits: { requests_per_minute: 10_000, tokens_per_minute: 10_000_000, burst: 0 } });
  const cases = Array.from({ length: CASES }, (_, i) => ({ id: `c${i}`, messages: [{ role: 'user', content: `answer ${i}` }], assert: { type: 'contains', value: `answer ${i}` } }));
  const created = await g.call('POST', '/v1/evals', { key: s.secret, body: { project_id: s.projectId, name: 'crash', model: 'gpt-test', cases, concurrency: 4 } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const evalId = created.body.id as string;

  const progress = async () => (await g!.call('GET', `/v1/evals/${evalId}`, { key: s.secret })).body;
  await pollUntil('a third of the cases done', async () => (await progress()).progress.done >= CASES / 3, 60_000, 20);
  expect(await g.stop('SIGKILL')).toBe('SIGKILL');

  g = await startGateway(env, { port: g.port, timeoutMs: STARTUP_MS });
  const atRestart = await progress();
  expect(atRestart.progress.done).toBeLessThan(CASES);
  const done = await pollUntil('the run completed after the restart', async () => {
    const run = await progress();
    return run.status === 'completed' ? run : null;
  }, 60_000, 100);
  expect(done.summary.total).toBe(CASES);

  const results: any[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await g.call('GET', `/v1/evals/${evalId}/results?limit=100${after ? `&starting_after=${after}` : ''}`, { key: s.secret });
    results.push(...page.body.data);
    if (!page.body.has_more) break;
    after = page.body.data.at(-1).id;
  }
  expect(results).toHaveLength(CASES);
  expect(results.map((r) => r.case_id)).toEqual(cases.map((c) => c.id));
  // Passed, or (only when the kill fell between the charge and the stored answer) errored as interrupted, charged once.
  for (const r of results) {
    if (r.status !== 'passed') expect({ case: r.case_id, status: r.status, reason: r.reason }).toMatchObject({ status: 'errored', reason: expect.stringMatching(/^interrupted/) });
  }
  expect(done.summary.passed).toBeGreaterThanOrEqual(CASES - 4);

  // Usage records of the run's calls, by case (the request id's first 26 characters name the case).
  const records: any[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await g.call('GET', `/v1/usage?granularity=request&project_id=${s.projectId}&limit=100${cursor ? `&starting_after=${cursor}` : ''}`, { key: s.secret });
    expect(page.status).toBe(200);
    records.push(...page.body.data);
    if (!page.body.has_more) break;
    cursor = page.body.data.at(-1).request_id;
  }
  for (let i = 0; i < CASES; i++) {
    const prefix = caseRequestId(evalId, i, 'main', 1).slice(0, 26);
    const charged = records.filter((u) => u.status === 'succeeded' && u.request_id.startsWith(prefix)).length;
    // A passed case was charged exactly once; an interrupted one at most once.
    if (results[i].status === 'passed') expect({ case: i, charged }).toEqual({ case: i, charged: 1 });
    else expect(charged, `case ${i}`).toBeLessThanOrEqual(1);
  }
  console.info(`eval crash: done at kill ${atRestart.progress.done}/${CASES}, provider calls ${provider.calls}, usage records ${records.length}, interrupted ${results.filter((r) => r.status === 'errored').length}`);
});
