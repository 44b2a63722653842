import OpenAI, { toFile } from 'openai';
import { afterAll, expect, it } from 'vitest';
import { lineRequestId } from '../../src/jobs/batch-runner/runner.ts';
import { seedProject } from '../helpers/app.ts';
import { startCrashRig, type CrashRig } from '../helpers/crash-rig.ts';
import { pollUntil } from '../helpers/gateway-process.ts';

let rig: CrashRig | undefined;
afterAll(async () => {
  await rig?.close();
});

const LINES = 60;

/**
 * The real gateway (api and worker in one process) killed with SIGKILL a third of the way through a 60-line batch, then
 * started again on the same database and Redis: the batch completes with every line in its output (or, when the kill
 * fell between the charge and the stored answer, in the error file as interrupted), and no line charged twice.
 */
it('finishes a 60-line batch killed with SIGKILL mid-way, every line charged at most once', { timeout: 600_000 }, async () => {
  rig = await startCrashRig('batchcrash', { SVC_EVAL_LEASE_MS: '1500' });
  let g = rig.gateway;
  const s = await seedProject(g, { scopes: ['inference:write', 'usage:read'], limits: { requests_per_minute: 10_000, tokens_per_minute: 10_000_000, burst: 0 } });
  const sdk = () => new OpenAI({ baseURL: `${g.baseUrl}/v1`, apiKey: s.secret, maxRetries: 0 });
  const lines = Array.from({ length: LINES }, (_, i) =>
    JSON.stringify({ custom_id: `c${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'gpt-test', messages: [{ role: 'user', content: `answer ${i}` }] } }),
  );
  const file = await sdk().files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'crash.jsonl'), purpose: 'batch' });
  const batch = await sdk().batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });

  const counts = async () => (await sdk().batches.retrieve(batch.id)).request_counts!;
  await pollUntil('a third of the lines done', async () => (await counts()).completed >= LINES / 3, 120_000, 20);
  await rig.kill();

  g = await rig.start();
  const atRestart = await counts();
  expect(atRestart.completed).toBeLessThan(LINES);
  const done = await pollUntil('the batch completed after the restart', async () => {
    const b = await sdk().batches.retrieve(batch.id);
    return b.status === 'completed' ? b : null;
  }, 120_000, 100);
  expect(done.request_counts!.total).toBe(LINES);
  const out = (await (await sdk().files.content(done.output_file_id!)).text()).trim().split('\n').map((l) => JSON.parse(l));
  const errors = done.error_file_id ? (await (await sdk().files.content(done.error_file_id)).text()).trim().split('\n').map((l) => JSON.parse(l)) : [];
  expect(out.length + errors.length).toBe(LINES);
  // Every line once across both files (the files are written a chunk at a time, rewritten whole after a restart).
  expect(new Set([...out, ...errors].map((l) => l.custom_id)).size).toBe(LINES);
  for (const e of errors) expect({ line: e.custom_id, code: e.error.code }).toEqual({ line: e.custom_id, code: 'interrupted' });
  expect(out.length).toBeGreaterThanOrEqual(LINES - 4);

  const records: any[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await g.call('GET', `/v1/usage?granularity=request&limit=100${cursor ? `&starting_after=${cursor}` : ''}`, { key: s.secret });
    expect(page.status).toBe(200);
    records.push(...page.body.data);
    if (!page.body.has_more) break;
    cursor = page.body.data.at(-1).request_id;
  }
  const answered = new Set(out.map((l) => l.custom_id));
  for (let i = 0; i < LINES; i++) {
    const prefix = lineRequestId(batch.id, i, 1).slice(0, 26);
    const charged = records.filter((u) => u.status === 'succeeded' && u.request_id.startsWith(prefix)).length;
    if (answered.has(`c${i}`)) expect({ line: i, charged }).toEqual({ line: i, charged: 1 });
    else expect(charged, `line ${i}`).toBeLessThanOrEqual(1);
  }
  console.info(`batch crash: completed at kill ${atRestart.completed}/${LINES}, provider calls ${rig.provider.calls}, usage records ${records.length}, interrupted ${errors.length}`);
});
