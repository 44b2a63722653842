import { afterAll, expect, it } from 'vitest';
import { seedProject } from '../helpers/app.ts';
import { startCrashRig, type CrashRig } from '../helpers/crash-rig.ts';
import { pollUntil } from '../helpers/gateway-process.ts';

let rig: CrashRig | undefined;
afterAll(async () => {
  await rig?.close();
});

const JOBS = 30;

/**
 * The real gateway (api and worker in one process) killed with SIGKILL while it works through 30 Risk assessments
 * (one vertical job each), then started again on the same database (PostgreSQL, or the embedded one in the same data
 * directory) and Redis: every job completes, with exactly one answered provider call and one charged (succeeded) usage
 * record per job. A job the kill caught between the provider's answer and its commit is resumed from the stored answer
 * (or the retained inference), never called or charged again; one whose call the kill cut off before the provider
 * answered was not charged, and is called again.
 */
it('completes 30 vertical jobs killed with SIGKILL midway, each with one provider call and one charge', { timeout: 600_000 }, async () => {
  rig = await startCrashRig('vertcrash', { SVC_VERTICAL_LEASE_MS: '1500' });
  const provider = rig.provider;
  let g = rig.gateway;
  const s = await seedProject(g, {
    scopes: ['risk:write', 'risk:read', 'inference:write', 'usage:read'],
    limits: { requests_per_minute: 10_000, tokens_per_minute: 10_000_000, burst: 0 },
  });
  // One case per job: each job's prompt differs (no response-cache hit stands in for a call).
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i++) {
    const c = await g.call('POST', '/v1/risk/cases', { key: s.secret, body: { title: `case ${i}`, assignee: 'a', reviewer: 'b' } });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    const rsa = await g.call('POST', `/v1/risk/cases/${c.body.id}/assessments`, { key: s.secret, body: {} });
    expect(rsa.status, JSON.stringify(rsa.body)).toBe(200);
    ids.push(rsa.body.id);
  }

  const states = async () => {
    const list = await g.call('GET', '/v1/risk/assessments?limit=100', { key: s.secret });
    expect(list.status, JSON.stringify(list.body)).toBe(200);
    return new Map<string, any>(list.body.data.map((a: any) => [a.id, a]));
  };
  const ended = (m: Map<string, any>) => ids.filter((id) => ['completed', 'failed'].includes(m.get(id)?.status)).length;
  await pollUntil('a third of the jobs done', async () => ended(await states()) >= JOBS / 3, 90_000, 20);
  await rig.kill();
  const callsAtKill = provider.calls;

  g = await rig.start();
  const atRestart = ended(await states());
  expect(atRestart).toBeLessThan(JOBS);
  const done = await pollUntil('every job completed after the restart', async () => {
    const m = await states();
    return ended(m) === JOBS ? m : null;
  }, 90_000, 100);
  for (const id of ids) expect({ id, status: done.get(id).status, error: done.get(id).error ?? null }).toEqual({ id, status: 'completed', error: null });

  // One charged usage record per job: none charged twice, none lost.
  const records: any[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await g.call('GET', `/v1/usage?granularity=request&project_id=${s.projectId}&limit=100${cursor ? `&starting_after=${cursor}` : ''}`, { key: s.secret });
    expect(page.status).toBe(200);
    records.push(...page.body.data);
    if (!page.body.has_more) break;
    cursor = page.body.data.at(-1).request_id;
  }
  expect(records.filter((u) => u.status === 'succeeded')).toHaveLength(JOBS);
  // One provider call per job, answered once. The worker runs one job at a time, so the kill caught at most one call
  // in flight: cut off before the provider answered (its connection closed), or answered but lost with the process
  // before its usage record was durable (never charged). That one job alone may have been asked again.
  const answered = Array.from({ length: JOBS }, (_, i) =>
    provider.requests.filter((r) => !r.aborted && r.body.messages.some((m: any) => String(m.content).includes(`"title": "case ${i}"`))).length,
  );
  expect(answered.every((n) => n >= 1 && n <= 2), `answered calls per job: ${answered}`).toBe(true);
  expect(answered.filter((n) => n === 2).length, `answered calls per job: ${answered}`).toBeLessThanOrEqual(1);
  expect(provider.calls - provider.aborted).toBe(answered.reduce((a, b) => a + b, 0));
  console.info(`vertical crash: done at kill ${atRestart}/${JOBS}, provider calls at kill ${callsAtKill}, after ${provider.calls} (${provider.aborted} cut off by the kill), usage records ${records.length}`);
});
