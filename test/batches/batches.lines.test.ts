import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchRunner } from '../../src/jobs/batch-runner/runner.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { writeProvidersFile } from '../inference/fixtures.ts';

/**
 * What a batch's lines answer and how a batch ends (CONTRACT §21): output lines carry the body a live call answers
 * (tool calls included), `finalizing` is visible while the files are written and survives a worker's death there, a
 * cancel during it ends the batch cancelled, and a key's model list refuses a line as the live call would (§22).
 */

let t: TestApp;
let operator: Client;
let base: string;

const SCOPES = ['inference:write', 'keys:manage'];
const weather = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [{ name: 'mock', kind: 'mock', region: 'local', models: [{ id: 'mock-1', input_per_mtok: 1, output_per_mtok: 1 }, { id: 'mock-2', input_per_mtok: 1, output_per_mtok: 1 }] }],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  operator = client(t.app);
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}/v1`;
}, 240_000);
afterAll(async () => {
  await t?.close();
});

const sdk = (secret: string) => new OpenAI({ baseURL: base, apiKey: secret, maxRetries: 0 });
const chatLine = (id: string, body: Record<string, unknown>) => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body });
const parse = (text: string) => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

async function submit(openai: OpenAI, lines: string[]) {
  const file = await openai.files.create({ file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'input.jsonl'), purpose: 'batch' });
  return openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
}

const runner = (opts: ConstructorParameters<typeof BatchRunner>[1] = {}) => new BatchRunner(t.deps, { sleep: async (ms) => t.clock.advance(ms), ...opts });

describe('output lines', () => {
  it('carry the chat completion a live call answers: tool_calls, finish_reason, usage and svc', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const openai = sdk(s.secret);
    const request = { model: 'mock-1', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: weather };
    const live = await openai.chat.completions.create(request as never);
    const batch = await submit(openai, [chatLine('tools', request), chatLine('text', { model: 'mock-1', messages: [{ role: 'user', content: 'plain' }] })]);
    expect(await runner().runPending()).toBe(1);
    const done = await openai.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 2, failed: 0 } });
    const out = parse(await (await openai.files.content(done.output_file_id!)).text());
    const body = out[0].response.body;
    // The same fields as the live answer, and the same choice (the tool call and why the model stopped).
    expect(Object.keys(body).sort()).toEqual(Object.keys(live).sort());
    expect(body.choices[0].finish_reason).toBe('tool_calls');
    expect(body.choices[0].message.content).toBeNull();
    expect(body.choices[0].message.tool_calls).toHaveLength(1);
    expect(body.choices[0].message.tool_calls[0]).toMatchObject({ type: 'function', function: { name: 'get_weather' } });
    expect(body.choices).toEqual(live.choices.map((c) => ({ ...c, message: { ...c.message, tool_calls: c.message.tool_calls!.map((call, i) => ({ ...call, id: body.choices[0].message.tool_calls[i].id })) } })));
    expect(body.svc).toMatchObject({ request_id: out[0].response.request_id, route: 'mock/mock-1' });
    expect(body.id).toMatch(/^inf_/);
    expect(out[1].response.body.choices[0]).toMatchObject({ finish_reason: 'stop', message: { role: 'assistant', content: expect.any(String) } });
    expect(out[1].response.body.choices[0].message.tool_calls).toBeUndefined();
  });

  it('a line naming a model outside the key\'s list fails in the error file as the live call would (403, param model); the others run', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const limited = await client(t.app, s.secret).post('/v1/keys', { project_id: s.projectId, name: 'only-mock-1', scopes: ['inference:write'], models: ['mock-1'] });
    expect(limited.status).toBe(200);
    const openai = sdk(limited.body.secret);
    const live = await openai.chat.completions.create({ model: 'mock-2', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(live).toBeInstanceOf(OpenAI.PermissionDeniedError);
    const batch = await submit(openai, [chatLine('ok', { model: 'mock-1', messages: [{ role: 'user', content: 'a' }] }), chatLine('outside', { model: 'mock-2', messages: [{ role: 'user', content: 'b' }] })]);
    await runner().runPending();
    const done = await openai.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 1, failed: 1 } });
    expect(parse(await (await openai.files.content(done.output_file_id!)).text()).map((l) => l.custom_id)).toEqual(['ok']);
    const [err] = parse(await (await openai.files.content(done.error_file_id!)).text());
    expect(err).toMatchObject({
      custom_id: 'outside',
      response: { status_code: 403, body: { error: { code: 'insufficient_scope', type: 'svc.error', param: 'model', message: expect.stringContaining('mock-2') } } },
      error: { code: 'insufficient_scope', message: expect.stringContaining('mock-2') },
    });
    // The error body the live call answered, field for field (its request id and doc_url are the line's).
    const liveError = (live as InstanceType<typeof OpenAI.PermissionDeniedError>).error as Record<string, unknown>;
    expect(Object.keys(err.response.body.error).sort()).toEqual(Object.keys(liveError).sort());
    expect(err.response.body.error).toEqual({ ...liveError, request_id: err.response.request_id, doc_url: expect.stringMatching(/\/docs\/errors#insufficient_scope$/) });
  });
});

describe('finalizing', () => {
  it('shows status finalizing (with finalizing_at) after the last line, while the files are written; then completed', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const openai = sdk(s.secret);
    const batch = await submit(openai, [chatLine('a', { model: 'mock-1', messages: [{ role: 'user', content: 'a' }] })]);
    let seen: OpenAI.Batch | null = null;
    await runner({ onFinalizing: async () => void (seen = await openai.batches.retrieve(batch.id)) }).runPending();
    expect(seen).toMatchObject({ status: 'finalizing', request_counts: { total: 1, completed: 1, failed: 0 }, output_file_id: null });
    expect(seen!.finalizing_at).toBeGreaterThan(0);
    const done = await openai.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: 'completed', finalizing_at: seen!.finalizing_at });
    expect(done.output_file_id).toMatch(/^file-/);
  });

  it('a worker that dies while finalizing leaves the batch finalizing; the next one writes the files without running a line again', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const openai = sdk(s.secret);
    const batch = await submit(openai, ['a', 'b', 'c'].map((id) => chatLine(id, { model: 'mock-1', messages: [{ role: 'user', content: id }] })));
    const dying = runner({ leaseMs: 5_000, onFinalizing: async () => Promise.reject(new Error('killed while finalizing')) });
    await expect(dying.runPending()).rejects.toThrow('killed while finalizing');
    expect((await openai.batches.retrieve(batch.id)).status).toBe('finalizing');
    // Within the lease the batch is still the dead worker's.
    expect(await runner().runPending()).toBe(0);
    t.clock.advance(6_000);
    expect(await runner().runPending()).toBe(1);
    const done = await openai.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 3, completed: 3, failed: 0 } });
    expect(parse(await (await openai.files.content(done.output_file_id!)).text()).map((l) => l.custom_id)).toEqual(['a', 'b', 'c']);
    await t.deps.outcomes.flush();
    const ids = parse(await (await openai.files.content(done.output_file_id!)).text()).map((l) => l.response.request_id);
    expect(await t.deps.db.usageRecord.count({ where: { requestId: { in: ids } } })).toBe(3);
  });

  it('a cancel that comes while finalizing ends the batch cancelled, its lines all answered in the output file', async () => {
    const s = await seedProject(operator, { scopes: SCOPES });
    const openai = sdk(s.secret);
    const batch = await submit(openai, [chatLine('a', { model: 'mock-1', messages: [{ role: 'user', content: 'a' }] })]);
    await runner({ onFinalizing: async () => void expect((await openai.batches.cancel(batch.id)).status).toBe('cancelling') }).runPending();
    const done = await openai.batches.retrieve(batch.id);
    expect(done).toMatchObject({ status: 'cancelled', request_counts: { total: 1, completed: 1, failed: 0 } });
    expect(parse(await (await openai.files.content(done.output_file_id!)).text()).map((l) => l.custom_id)).toEqual(['a']);
  });
});
