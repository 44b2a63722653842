import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { eventually, startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { expectOneOutcome, INFERENCE_KEYS, user, writeProvidersFile } from './fixtures.ts';

let t: TestApp;
let base: string;
let api: Client;
let secret: string;
let projectId: string;
let mock: MockOpenAI;
let backup: MockOpenAI;

beforeAll(async () => {
  [mock, backup] = await Promise.all([startMockOpenAI(), startMockOpenAI()]);
  const file = writeProvidersFile({
    providers: [
      {
        name: 'local',
        kind: 'openai',
        base_url: mock.url,
        region: 'eu-west-1',
        timeout_ms: 5000,
        models: [{ id: 'gpt-test', input_per_mtok: 1.0, output_per_mtok: 2.0 }],
      },
      {
        name: 'backup',
        kind: 'openai',
        base_url: backup.url,
        region: 'eu-west-1',
        timeout_ms: 5000,
        models: [{ id: 'gpt-test', input_per_mtok: 3.0, output_per_mtok: 4.0 }],
      },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1000' } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const addr = t.app.server.address() as { port: number };
  base = `http://127.0.0.1:${addr.port}`;
  const seeded = await seedProject(client(t.app), {
    plan: 'growth',
    scopes: ['inference:write', 'models:read', 'usage:read'],
  });
  secret = seeded.secret;
  projectId = seeded.projectId;
  api = client(t.app, secret);
});
afterAll(async () => {
  await t.close();
  await Promise.all([mock.close(), backup.close()]);
});
beforeEach(() => {
  mock.reset();
  backup.reset();
});

interface SseEvent {
  event: string | null;
  data: string;
}

function parseSse(text: string): SseEvent[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      let event: string | null = null;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      return { event, data: data.join('\n') };
    });
}

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

describe('stream: true on POST /v1/inference', () => {
  it('sends the content as delta events, then one done event with usage and cost', async () => {
    const res = await post('/v1/inference', { model: 'gpt-test', project_id: projectId, messages: user('one two three four'), stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const requestId = res.headers.get('x-svc-request-id')!;
    expect(requestId).toMatch(/^req_/);
    expect(res.headers.get('x-svc-key-id')).toMatch(/^key_/);
    const events = parseSse(await res.text());
    const deltas = events.filter((e) => e.event === 'delta').map((e) => JSON.parse(e.data));
    expect(deltas.length).toBe(4);
    expect(deltas.map((d) => d.delta.content).join('')).toBe('one two three four');
    const last = events.at(-1)!;
    expect(last.event).toBe('done');
    const done = JSON.parse(last.data);
    expect(Object.keys(done).sort()).toEqual(INFERENCE_KEYS);
    expect(deltas[0].id).toBe(done.id);
    // Same accounting as without streaming: 18 + 18 characters at $1 and $2 per million = 54 µ$.
    expect(done).toMatchObject({
      object: 'svc.inference',
      route: 'local/gpt-test',
      message: { role: 'assistant', content: 'one two three four' },
      usage: { prompt_tokens: 18, completion_tokens: 18, total_tokens: 36 },
      cost_usd: 0.000054,
      request_id: requestId,
      cache_hit: false,
    });
    expect(mock.requests[0]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    await expectOneOutcome(t, requestId, { status: 'succeeded', costMicros: 54n, promptTokens: 18, completionTokens: 18 });
  });

  it('accounts a stream exactly as the same request without streaming', async () => {
    const body = { model: 'gpt-test', project_id: projectId, messages: user('same accounting please') };
    const plain = await api.post('/v1/inference', body);
    const streamed = parseSse(await (await post('/v1/inference', { ...body, stream: true })).text());
    const done = JSON.parse(streamed.at(-1)!.data);
    expect(done.usage).toEqual(plain.body.usage);
    expect(done.cost_usd).toBe(plain.body.cost_usd);
  });

  it('counts the tokens itself when the provider streams no usage', async () => {
    mock.set({ usage: null });
    const res = await post('/v1/inference', { model: 'gpt-test', project_id: projectId, messages: user('count these words'), stream: true });
    const done = JSON.parse(parseSse(await res.text()).at(-1)!.data);
    expect(done.usage.prompt_tokens).toBeGreaterThan(0);
    expect(done.usage.completion_tokens).toBe(3); // "count these words" is 3 tokens in o200k
    await expectOneOutcome(t, done.request_id, { status: 'succeeded', completionTokens: 3 });
  });

  it('stops the provider call when the client disconnects, and still records the usage', async () => {
    mock.set({ chunks: Array.from({ length: 40 }, (_, i) => `word${i} `), chunkDelayMs: 50 });
    const body = JSON.stringify({ model: 'gpt-test', project_id: projectId, messages: user('a long answer'), stream: true });
    const requestId = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(
        `${base}/v1/inference`,
        { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' } },
        (res) => {
          const id = res.headers['x-svc-request-id'] as string;
          let seen = '';
          res.on('data', (chunk: Buffer) => {
            seen += chunk.toString();
            // After the first two deltas, walk away.
            if ((seen.match(/event: delta/g) ?? []).length >= 2) {
              req.destroy();
              resolve(id);
            }
          });
          res.on('error', () => {});
        },
      );
      req.on('error', () => {});
      req.on('close', () => reject(new Error('closed before two deltas')));
      req.end(body);
    });
    await eventually(async () => mock.aborted === 1);
    expect(mock.calls).toBe(1);
    const record = await eventually(() => t.deps.db.usageRecord.findUnique({ where: { requestId } }));
    expect(record.status).toBe('failed');
    expect(record.errorCode).toBe('client_disconnected');
    // Charged for what was used: the prompt and the words streamed before the client left.
    expect(record.promptTokens).toBeGreaterThan(0);
    expect(record.completionTokens).toBeGreaterThan(0);
    expect(record.costMicros).toBeGreaterThan(0n);
    await expectOneOutcome(t, requestId, { status: 'failed', errorCode: 'client_disconnected', route: 'local/gpt-test' });
  });

  it('answers an ordinary JSON error when no provider accepts the stream', async () => {
    mock.set({ status: 500 });
    backup.set({ status: 500 });
    const res = await post('/v1/inference', { model: 'gpt-test', project_id: projectId, messages: user('x'), stream: true });
    expect(res.status).toBe(503);
    const body = (await res.json()) as any;
    expect(body.error.code).toBe('model_unavailable');
    await expectOneOutcome(t, body.error.request_id, { status: 'failed', errorCode: 'model_unavailable' });
  });

  it('falls back before the first token', async () => {
    mock.set({ status: 502 });
    const res = await post('/v1/inference', { model: 'gpt-test', project_id: projectId, messages: user('fallback stream'), stream: true });
    const done = JSON.parse(parseSse(await res.text()).at(-1)!.data);
    expect(done.route).toBe('backup/gpt-test');
  });

  it('ends with an error event when the provider fails in the middle, and records the failure', async () => {
    mock.set({ chunks: ['a ', 'b ', 'c ', 'd '], dropAfterChunks: 2, chunkDelayMs: 50 });
    const res = await post('/v1/inference', { model: 'gpt-test', project_id: projectId, messages: user('x'), stream: true });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-svc-request-id')!;
    const events = parseSse(await res.text());
    expect(events.filter((e) => e.event === 'delta')).toHaveLength(2);
    const last = events.at(-1)!;
    expect(last.event).toBe('error');
    const err = JSON.parse(last.data);
    expect(err.error).toMatchObject({ type: 'svc.error', code: 'model_unavailable', request_id: requestId });
    await expectOneOutcome(t, requestId, { status: 'failed', errorCode: 'model_unavailable', route: 'local/gpt-test' });
  });

  it('streams a cache hit as one delta, at zero cost', async () => {
    const body = { model: 'gpt-test', project_id: projectId, messages: user('cached stream'), cache: true };
    await api.post('/v1/inference', body);
    const res = await post('/v1/inference', { ...body, stream: true });
    expect(res.headers.get('x-svc-cache')).toBe('hit');
    const events = parseSse(await res.text());
    expect(events.map((e) => e.event)).toEqual(['delta', 'done']);
    const done = JSON.parse(events[1]!.data);
    expect(done).toMatchObject({ cache_hit: true, cost_usd: 0, message: { content: 'cached stream' } });
    expect(mock.calls).toBe(1);
  });

  it('with an Idempotency-Key: a retry after the stream finished gets the result as JSON, without calling the provider', async () => {
    const body = { model: 'gpt-test', project_id: projectId, messages: user('idempotent stream'), stream: true };
    const first = await post('/v1/inference', body, { 'idempotency-key': 'stream-1' });
    const done = JSON.parse(parseSse(await first.text()).at(-1)!.data);
    const retry = await post('/v1/inference', body, { 'idempotency-key': 'stream-1' });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(done);
    expect(mock.calls).toBe(1);
  });

  it('with an Idempotency-Key: a duplicate while the stream runs gets 409', async () => {
    mock.set({ chunks: ['slow ', 'stream '], chunkDelayMs: 300 });
    const body = { model: 'gpt-test', project_id: projectId, messages: user('running stream'), stream: true };
    const first = await post('/v1/inference', body, { 'idempotency-key': 'stream-2' });
    expect(first.status).toBe(200);
    const dup = await api.post('/v1/inference', body, { headers: { 'idempotency-key': 'stream-2' } });
    expectError(dup, 409, 'idempotency_conflict');
    await first.text();
    expect(mock.calls).toBe(1);
  });
});

describe('the official openai SDK against the gateway', () => {
  const sdk = () => new OpenAI({ baseURL: `${base}/v1`, apiKey: secret, maxRetries: 0 });

  it('completes a chat', async () => {
    const completion = await sdk().chat.completions.create({
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'You echo.' },
        { role: 'user', content: 'Hello from the SDK' },
      ],
    });
    expect(completion.object).toBe('chat.completion');
    expect(completion.choices[0]!.message).toMatchObject({ role: 'assistant', content: 'Hello from the SDK' });
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(completion.usage).toEqual({ prompt_tokens: 27, completion_tokens: 18, total_tokens: 45 });
    expect(completion.model).toBe('gpt-test');
    const record = await expectOneOutcome(t, (completion as any).svc.request_id, { status: 'succeeded', route: 'local/gpt-test' });
    expect(record.projectId).toBe(projectId);
  });

  it('completes a streamed chat, with usage when asked', async () => {
    const stream = await sdk().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'streamed through the SDK' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined = null;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      if (chunk.choices[0]) {
        content += chunk.choices[0].delta.content ?? '';
        finish = chunk.choices[0].finish_reason ?? finish;
      }
      if (chunk.choices.length > 0) expect(chunk.usage).toBeNull(); // OpenAI: usage null on every chunk but the last
      if (chunk.usage) usage = chunk.usage;
    }
    expect(content).toBe('streamed through the SDK');
    expect(finish).toBe('stop');
    expect(usage).toEqual({ prompt_tokens: 24, completion_tokens: 24, total_tokens: 48 });
  });

  it('uses the stream helper that collects the final message', async () => {
    const runner = sdk().chat.completions.stream({ model: 'auto', messages: [{ role: 'user', content: 'runner' }] });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe('runner');
  });

  it('lists and retrieves models', async () => {
    const list = await sdk().models.list();
    const ids = list.data.map((m) => m.id);
    expect(ids).toEqual(['gpt-test']);
    const model = await sdk().models.retrieve('gpt-test');
    expect(model).toMatchObject({ id: 'gpt-test', object: 'model', owned_by: 'local' });
  });

  it('surfaces gateway errors as SDK errors with the status', async () => {
    await expect(sdk().chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 400,
      code: 'invalid_request',
      param: 'model',
    });
    const weak = await seedProject(client(t.app), { scopes: ['usage:read'] });
    const denied = new OpenAI({ baseURL: `${base}/v1`, apiKey: weak.secret, maxRetries: 0 });
    await expect(denied.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 403,
      code: 'insufficient_scope',
    });
    await expect(denied.models.list()).rejects.toMatchObject({ status: 403 });
  });
});
