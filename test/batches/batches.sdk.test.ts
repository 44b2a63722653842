import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchRunner } from '../../src/jobs/batch-runner/runner.ts';
import { buildTestApp, client, createTestDatabase, seedProject, type Client, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { startReceiver, type Receiver } from '../helpers/https-receiver.ts';
import { eventually, startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';
import { createWebhook, testWorker, webhookEnv } from '../webhooks/support.ts';

let db: TestDatabase;
let t: TestApp;
let operator: Client;
let provider: MockOpenAI;
let base: string;
let env: Record<string, string>;
const receivers: Receiver[] = [];
const extraApps: TestApp[] = [];

const SCOPES = ['inference:write', 'usage:read', 'keys:manage', 'governance:manage', 'budgets:manage'];

beforeAll(async () => {
  provider = await startMockOpenAI();
  const file = writeProvidersFile({
    providers: [
      {
        name: 'priced',
        kind: 'openai',
        base_url: provider.url,
        region: 'eu-west-1',
        timeout_ms: 5000,
        // 1 $ per million tokens each way: every line costs a little.
        models: [{ id: 'gpt-test', input_per_mtok: 1.0, output_per_mtok: 1.0 }],
      },
      { name: 'builtin', kind: 'mock', region: 'eu-west-1', models: [{ id: 'mock-embed-1', type: 'embedding', input_per_mtok: 0, output_per_mtok: 0 }] },
    ],
  });
  env = { ...webhookEnv(), SVC_PROVIDERS_FILE: file, SVC_OUTCOME_LEASE_MS: '500' };
  db = await createTestDatabase();
  t = await buildTestApp({ env, database: db });
  operator = client(t.app);
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}/v1`;
}, 240_000);

afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  for (const a of extraApps) await a.close();
  await t?.close();
  await db?.drop();
  await provider?.close();
});

const sdk = (secret: string) => new OpenAI({ baseURL: base, apiKey: secret, maxRetries: 0 });
const chatLine = (id: string, text: string, model = 'gpt-test') =>
  JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { model, messages: [{ role: 'user', content: text }] } });
const jsonl = (lines: string[]) => lines.join('\n') + '\n';
const runner = (app: TestApp, waits: number[] = [], opts: { concurrency?: number } = {}) =>
  new BatchRunner(app.deps, {
    concurrency: opts.concurrency ?? 1,
    sleep: async (ms) => {
      waits.push(ms);
      app.clock.advance(ms);
    },
  });

async function submit(openai: OpenAI, lines: string[], endpoint: '/v1/chat/completions' | '/v1/embeddings' | '/v1/responses' = '/v1/chat/completions') {
  const file = await openai.files.create({ file: await toFile(Buffer.from(jsonl(lines)), 'input.jsonl'), purpose: 'batch' });
  return openai.batches.create({ input_file_id: file.id, endpoint, completion_window: '24h' });
}

const parse = (text: string) => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

describe('the Batch API through the official openai SDK', () => {
  it('files.create, batches.create, retrieve, list and files.content of the output: every line answered as the creating key', async () => {
    provider.reset({ usage: { prompt_tokens: 100, completion_tokens: 50 } });
    const s = await seedProject(operator, { scopes: SCOPES });
    const openai = sdk(s.secret);
    const file = await openai.files.create({ file: await toFile(Buffer.from(jsonl([chatLine('a', 'one'), chatLine('b', 'two'), chatLine('c', 'three')])), 'in.jsonl'), purpose: 'batch' });
    expect(file).toMatchObject({ object: 'file', purpose: 'batch', filename: 'in.jsonl', status: 'processed' });
    expect(file.id).toMatch(/^file-/);
    expect(await openai.files.retrieve(file.id)).toMatchObject({ id: file.id, bytes: file.bytes });
    const batch = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { team: 'x' } });
    expect(batch).toMatchObject({ object: 'batch', status: 'validating', input_file_id: file.id, request_counts: { total: 3, completed: 0, failed: 0 }, metadata: { team: 'x' } });
    expect(batch.id).toMatch(/^batch_/);

    expect(await runner(t).runPending()).toBeGreaterThanOrEqual(1);
    const done = await openai.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 3, completed: 3, failed: 0 }, error_file_id: null });
    expect(done.completed_at).toBeGreaterThan(0);
    expect((done as any).cost_usd).toBeCloseTo(0.00045, 8);

    const out = parse(await (await openai.files.content(done.output_file_id!)).text());
    expect(out.map((l) => l.custom_id)).toEqual(['a', 'b', 'c']);
    expect(out[0]).toMatchObject({ response: { status_code: 200, body: { object: 'chat.completion', model: 'gpt-test', usage: { prompt_tokens: 100, completion_tokens: 50 } } }, error: null });
    expect(out[0].response.body.choices[0].message.role).toBe('assistant');
    expect(out[0].id).toMatch(/^batch_req_/);

    // Each line went through the pipeline as the creating key: one usage record each, under that key.
    // With Redis the usage stream is written in the background: wait for the three records.
    const ids = new Set(out.map((l) => l.response.request_id));
    const records = await eventually(async () => {
      const usage = await client(t.app, s.secret).get('/v1/usage', { query: { granularity: 'request', limit: 100 } });
      const mine = usage.body.data.filter((u: any) => ids.has(u.request_id));
      return mine.length >= 3 ? mine : null;
    }, 15_000);
    expect(records).toHaveLength(3);
    expect(records.every((u: any) => u.key_id === s.keyId && u.status === 'succeeded')).toBe(true);

    const page = await openai.batches.list({ limit: 10 });
    expect(page.data.map((b) => b.id)).toContain(batch.id);
  });

  it('runs embeddings and responses lines too', async () => {
    provider.reset();
    const s = await seedProject(operator, { scopes: SCOPES });
    const openai = sdk(s.secret);
    const emb = await submit(openai, [JSON.stringify({ custom_id: 'e1', method: 'POST', url: '/v1/embeddings', body: { model: 'mock-embed-1', input: 'hello' } })], '/v1/embeddings');
    const resp = await submit(openai, [JSON.stringify({ custom_id: 'r1', method: 'POST', url: '/v1/responses', body: { model: 'gpt-test', input: 'hi there' } })], '/v1/responses');
    await runner(t).runPending();
    const e = await openai.batches.retrieve(emb.id);
    expect(e.status).toBe('completed');
    const eLines = parse(await (await openai.files.content(e.output_file_id!)).text());
    expect(eLines[0].response.body.data[0].embedding).toHaveLength(256);
    const r = await openai.batches.retrieve(resp.id);
    const rLines = parse(await (await openai.files.content(r.output_file_id!)).text());
    expect(rLines[0].response.body).toMatchObject({ object: 'response', status: 'completed' });
    expect(rLines[0].response.body.output[0].content[0].type).toBe('output_text');
  });

  it('reports a bad line by its line number in the error file and runs the others', async () => {
    provider.reset();
    const s = await seedProject(operator, { scopes: SCOPES });
    const openai = sdk(s.secret);
    const batch = await submit(openai, [chatLine('ok', 'fine'), JSON.stringify({ custom_id: 'bad', method: 'POST', url: '/v1/chat/completions', body: { model: 'nope-model', messages: [{ role: 'user', content: 'x' }] } }), chatLine('ok', 'dup')]);
    expect(batch.request_counts).toEqual({ total: 3, completed: 0, failed: 2 });
    await runner(t).runPending();
    const done = await openai.batches.retrieve(batch.id);
    expect(done.request_counts).toEqual({ total: 3, completed: 1, failed: 2 });
    const errors = parse(await (await openai.files.content(done.error_file_id!)).text());
    expect(errors.map((l) => [l.custom_id, l.error.code, l.error.line])).toEqual([
      ['bad', 'invalid_request', 2],
      ['ok', 'invalid_request', 3],
    ]);
    expect(errors[0].error.message).toMatch(/^Line 2: unknown model/);
  });

  it('fails a batch whose file holds no good line, with the errors by line', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const batch = await submit(sdk(s.secret), [JSON.stringify({ custom_id: 'x', method: 'GET', url: '/v1/chat/completions', body: {} })]);
    expect(batch.status).toBe('failed');
    expect(batch.errors?.data?.[0]).toMatchObject({ code: 'invalid_request', line: 1, param: 'method' });
  });

  it('stops at budget_exceeded: the line past the budget and the rest are in the error file', async () => {
    // 150 tokens a line = 150 µ$; a budget of 300 µ$ lets two lines through.
    provider.reset({ usage: { prompt_tokens: 100, completion_tokens: 50 } });
    const s = await seedProject(operator, { scopes: SCOPES, budgetUsd: 0.0003 });
    const openai = sdk(s.secret);
    const batch = await submit(openai, Array.from({ length: 6 }, (_, i) => chatLine(`l${i}`, `line ${i}`)));
    await runner(t).runPending();
    const done = await openai.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 6, completed: 2, failed: 4 } });
    expect((done as any).cost_usd).toBeCloseTo(0.0003, 8);
    const errors = parse(await (await openai.files.content(done.error_file_id!)).text());
    expect(errors.map((l) => l.custom_id)).toEqual(['l2', 'l3', 'l4', 'l5']);
    // Error-file lines: the refused request with its answer and its code in `error`, the lines not run with `error` only.
    expect(errors[0]).toMatchObject({ error: { code: 'budget_exceeded', message: expect.any(String) }, response: { status_code: 429, request_id: expect.stringMatching(/^req_/), body: { error: { type: 'svc.error', code: 'budget_exceeded', param: null } } } });
    expect(errors[0].response.body.error.request_id).toBe(errors[0].response.request_id);
    expect(errors.slice(1).map((l) => [l.response, l.error.code])).toEqual([1, 2, 3].map(() => [null, 'budget_exceeded']));
    expect(provider.calls).toBe(2);
  });

  it('runs 200 lines across a 60 rpm limit: waits for the window instead of failing a line, and never exceeds it', async () => {
    provider.reset();
    const RPM = 60;
    const LINES = 200;
    const s = await seedProject(operator, { scopes: SCOPES, limits: { requests_per_minute: RPM, tokens_per_minute: 1_000_000, burst: 0 } });
    const openai = sdk(s.secret);
    const batch = await submit(openai, Array.from({ length: LINES }, (_, i) => chatLine(`w${i}`, `wait ${i}`)));
    const before = provider.calls;
    const start = t.clock.now();
    // The provider calls made at each instant of the injected clock (it moves only while the runner waits).
    const callsAt: { at: number; calls: number }[] = [];
    const r = new BatchRunner(t.deps, {
      concurrency: 2,
      sleep: async (ms) => {
        callsAt.push({ at: t.clock.now(), calls: provider.calls - before });
        t.clock.advance(ms);
      },
    });
    await r.runPending();
    callsAt.push({ at: t.clock.now(), calls: provider.calls - before });
    const done = await operator.get(`/v1/batches/${batch.id}`);
    expect(done.body).toMatchObject({ status: 'completed', request_counts: { total: LINES, completed: LINES, failed: 0 } });
    expect(provider.calls - before).toBe(LINES);
    expect(callsAt.length).toBeGreaterThan(1);
    // Never over the window: by any instant, at most RPM (+ burst 0) from rest plus RPM per minute since.
    for (const p of callsAt) expect(p.calls).toBeLessThanOrEqual(RPM + Math.floor(((p.at - start) * RPM) / 60_000));
    // And the lines waited rather than failed: 200 requests at 60 a minute (60 at once from rest) take over two minutes.
    expect(t.clock.now() - start).toBeGreaterThanOrEqual(((LINES - RPM) / RPM) * 60_000);
  }, 120_000);

  it('replays POST /v1/files and POST /v1/batches under the same Idempotency-Key', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const openai = sdk(s.secret);
    const upload = async () => openai.files.create({ file: await toFile(Buffer.from(chatLine('i', 'idem') + '\n'), 'i.jsonl'), purpose: 'batch' }, { headers: { 'Idempotency-Key': 'file-once' } });
    const f1 = await upload();
    const f2 = await upload();
    expect(f2.id).toBe(f1.id);
    const create = () => openai.batches.create({ input_file_id: f1.id, endpoint: '/v1/chat/completions', completion_window: '24h' }, { headers: { 'Idempotency-Key': 'batch-once' } });
    const b1 = await create();
    expect((await create()).id).toBe(b1.id);
    const list = await client(t.app, s.secret).get('/v1/batches');
    expect(list.body.data.filter((b: any) => b.input_file_id === f1.id)).toHaveLength(1);
    expect(list.body).toMatchObject({ object: 'list', first_id: b1.id, last_id: b1.id, has_more: false });
  });

  it('cancels: cancelling at once, cancelled by the worker, the rest of the lines in the error file, batch.completed delivered', async () => {
    provider.reset();
    const r = await startReceiver();
    receivers.push(r);
    const s = await seedProject(operator, { scopes: SCOPES });
    const api = client(t.app, s.secret);
    r.secret = (await createWebhook(api, { project_id: s.projectId, url: r.url, events: ['batch.completed'] })).secret;
    const openai = sdk(s.secret);
    const batch = await submit(openai, [chatLine('c1', 'x'), chatLine('c2', 'y')]);
    const cancelling = await openai.batches.cancel(batch.id);
    expect(cancelling).toMatchObject({ status: 'cancelling' });
    expect(cancelling.cancelling_at).toBeGreaterThan(0);
    expect((await openai.batches.cancel(batch.id)).status).toBe('cancelling');
    await runner(t).runPending();
    const done = await openai.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: 'cancelled', request_counts: { total: 2, completed: 0, failed: 2 } });
    const errors = parse(await (await openai.files.content(done.error_file_id!)).text());
    expect(errors.map((l) => l.error.code)).toEqual(['batch_cancelled', 'batch_cancelled']);
    const cancelAgain = await api.post(`/v1/batches/${batch.id}/cancel`, {});
    expect(cancelAgain.body.status).toBe('cancelled');
    const worker = testWorker(t);
    await worker.runDue();
    await worker.stop();
    await r.waitFor(1);
    expect(r.receipts[0]!.verifyError).toBeNull();
    expect(r.receipts.map((x) => ({ type: x.event!.type, data: x.event!.data }))).toEqual([
      { type: 'batch.completed', data: { batch_id: batch.id, status: 'cancelled', request_counts: { total: 2, completed: 0, failed: 2 }, cost_usd: 0 } },
    ]);
  });

  it('survives a restart: a second app over the same database takes the batch over after the lease, and charges no line twice', async () => {
    provider.reset({ usage: { prompt_tokens: 10, completion_tokens: 10 }, delayMs: 20 });
    const s = await seedProject(operator, { scopes: SCOPES });
    const openai = sdk(s.secret);
    const LINES = 12;
    const batch = await submit(openai, Array.from({ length: LINES }, (_, i) => chatLine(`r${i}`, `restart ${i}`)));
    const first = new BatchRunner(t.deps, { concurrency: 2, leaseMs: 5_000 });
    const running = first.runPending();
    while (provider.calls < 4) await new Promise((res) => setTimeout(res, 5));
    await first.stop(); // the process goes away holding the lease
    await running;
    const rows = await t.deps.db.batchLine.findMany({ where: { batchId: batch.id }, orderBy: { index: 'asc' } });
    const finished = rows.filter((l) => l.status === 'succeeded');
    expect(finished.length).toBeGreaterThan(0);
    expect(finished.length).toBeLessThan(LINES);
    // A crash in the instant after a call was answered and before its line was written: the line looks begun.
    await t.deps.db.batchLine.update({ where: { id: finished[0]!.id }, data: { status: 'started', result: null } });
    await t.deps.db.batch.update({ where: { id: batch.id }, data: { completed: { decrement: 1 } } });
    const callsBefore = provider.calls;

    const second = await buildTestApp({ env, database: db, clock: t.clock });
    extraApps.push(second);
    // Within the lease the batch is still the first worker's.
    expect(await runner(second).runPending()).toBe(0);
    t.clock.advance(6_000);
    expect(await runner(second, [], { concurrency: 2 }).runPending()).toBe(1);
    const done = await openai.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: LINES, completed: LINES, failed: 0 } });
    const out = parse(await (await openai.files.content(done.output_file_id!)).text());
    expect(out.map((l) => l.custom_id)).toEqual(Array.from({ length: LINES }, (_, i) => `r${i}`));
    // Every line called the provider once: the replayed one was not called again.
    expect(provider.calls).toBe(LINES);
    expect(provider.calls - callsBefore).toBe(LINES - finished.length);
    // With Redis the usage stream is written in the background: wait for the records, then count them.
    const ids = new Set(out.map((l) => l.response.request_id));
    const charged = async () => {
      const usage = await client(t.app, s.secret).get('/v1/usage', { query: { granularity: 'request', limit: 100 } });
      return usage.body.data.filter((u: any) => ids.has(u.request_id) && u.status === 'succeeded');
    };
    await eventually(async () => (await charged()).length >= LINES, 15_000);
    expect(await charged()).toHaveLength(LINES);
  });
});
