import { afterAll, expect, it } from 'vitest';
import { caseRequestId } from '../../src/jobs/eval-runner/runner.ts';
import { seedProject } from '../helpers/app.ts';
import { startCrashRig, type CrashRig } from '../helpers/crash-rig.ts';
import { pollUntil } from '../helpers/gateway-process.ts';
import { EVAL_SCOPES } from './support.ts';

let rig: CrashRig | undefined;
afterAll(async () => {
  await rig?.close();
});

const CASES = 50;

/**
 * The real gateway (api and worker in one process) killed with SIGKILL halfway through a 50-case run, then started
 * again on the same database (PostgreSQL, or the embedded one in the same data directory) and Redis: the run finishes
 * with exactly 50 results, and no case has more than one charged (succeeded) usage record.
 */
it('finishes a 50-case run killed with SIGKILL halfway, with 50 results and no case charged twice', { timeout: 600_000 }, async () => {
  rig = await startCrashRig('evalcrash', { SVC_EVAL_LEASE_MS: '1500' });
  const provider = rig.provider;
  let g = rig.gateway;
  const s = await seedProject(g, { scopes: EVAL_SCOPES, limits: { requests_per_minute: 10_000, tokens_per_minute: 10_000_000, burst: 0 } });
  const cases = Array.from({ length: CASES }, (_, i) => ({ id: `c${i}`, messages: [{ role: 'user', content: `answer ${i}` }], assert: { type: 'contains', value: `answer ${i}` } }));
  const created = await g.call('POST', '/v1/evals', { key: s.secret, body: { project_id: s.projectId, name: 'crash', model: 'gpt-test', cases, concurrency: 4 } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const evalId = created.body.id as string;

  const progress = async () => (await g.call('GET', `/v1/evals/${evalId}`, { key: s.secret })).body;
  await pollUntil('a third of the cases done', async () => (await progress()).progress.done >= CASES / 3, 60_000, 20);
  await rig.kill();

  g = await rig.start();
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
