import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reaskMessages } from '../../src/domain/inference/stages/structured-output.ts';
import { approxTokens, mockAnswer } from '../../src/providers/mock.ts';
import type { ChatMessage, ChatOptions } from '../../src/providers/types.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectOneOutcome, writeProvidersFile } from '../inference/fixtures.ts';

let t: TestApp;
let api: Client;
let projectId: string;

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [{ name: 'priced', kind: 'mock', region: 'eu-west-1', models: [{ id: 'mock-priced', input_per_mtok: 1, output_per_mtok: 2 }] }],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  const seeded = await seedProject(client(t.app), { plan: 'growth', scopes: ['inference:write', 'usage:read'] });
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
});
afterAll(async () => {
  await t?.close();
});

const PERSON = {
  type: 'object',
  properties: { name: { type: 'string' }, age: { type: 'integer', minimum: 0 } },
  required: ['name', 'age'],
  additionalProperties: false,
};
const schemaFormat = { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } };

const infer = (content: string, extra: Record<string, unknown> = {}) =>
  api.post('/v1/inference', { model: 'mock-priced', project_id: projectId, messages: [{ role: 'user', content }], response_format: schemaFormat, ...extra });

/**
 * What the gateway should charge for `attempts` answers to `content`: the mock's own counts (1 + ⌈chars/4⌉ a message;
 * ⌈chars/4⌉ an answer), each re-ask carrying the invalid answer and the gateway's feedback.
 */
function expectedTokens(content: string, attempts: number, errorsOf: (answer: string) => string[], options: ChatOptions) {
  let messages: ChatMessage[] = [{ role: 'user', content }];
  let prompt = 0;
  let completion = 0;
  for (let i = 0; i < attempts; i++) {
    prompt += messages.reduce((n, m) => n + 1 + approxTokens(String(m.content)), 0);
    const answer = mockAnswer(messages, undefined, options).content;
    completion += approxTokens(answer);
    messages = [...messages, ...reaskMessages(answer, errorsOf(answer))];
  }
  return { prompt, completion, costMicros: BigInt(prompt * 1 + completion * 2) };
}

describe('structured output (response_format)', () => {
  it('validates a good answer at once: attempts 1', async () => {
    const res = await infer('who?');
    expect(res.status, res.raw).toBe(200);
    expect(JSON.parse(res.body.message.content)).toEqual({ name: 'name', age: 1 });
    expect(res.body.attempts).toBe(1);
  });

  it('says attempts 0 for an answer from the response cache', async () => {
    const first = await infer('cached? [mock:wrong_json=1]', { cache: true });
    expect(first.body).toMatchObject({ attempts: 2, cache_hit: false });
    const again = await infer('cached? [mock:wrong_json=1]', { cache: true });
    expect(again.body).toMatchObject({ attempts: 0, cache_hit: true, message: first.body.message });
  });

  it('re-asks with the validation errors until the answer validates, charging every attempt', async () => {
    const content = 'who? [mock:wrong_json=1]';
    const res = await infer(content);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.attempts).toBe(2);
    expect(JSON.parse(res.body.message.content)).toEqual({ name: 'name', age: 1 });
    const want = expectedTokens(content, 2, () => ['/name must be string', '/age must be integer'], { response_format: schemaFormat as never });
    expect(res.body.usage).toEqual({ prompt_tokens: want.prompt, completion_tokens: want.completion, total_tokens: want.prompt + want.completion });
    expect(res.body.cost_usd).toBe(Number(want.costMicros) / 1e6);
    await expectOneOutcome(t, res.body.request_id, {
      status: 'succeeded',
      promptTokens: want.prompt,
      completionTokens: want.completion,
      costMicros: want.costMicros,
    });
  });

  it('answers 422 structured_output_failed after 3 attempts, naming the first error, and records all three', async () => {
    const content = 'who? [mock:wrong_json]';
    const res = await infer(content);
    expectError(res, 422, 'structured_output_failed');
    expect(res.body.error.message).toBe('The answer did not match the response format after 3 attempts: /name must be string.');
    const want = expectedTokens(content, 3, () => ['/name must be string', '/age must be integer'], { response_format: schemaFormat as never });
    await expectOneOutcome(t, res.body.error.request_id, {
      status: 'failed',
      errorCode: 'structured_output_failed',
      promptTokens: want.prompt,
      completionTokens: want.completion,
      costMicros: want.costMicros,
    });
  });

  it('checks json_object: text that is not JSON is re-asked', async () => {
    const ok = await infer('plain [mock:bad_json=2]', { response_format: { type: 'json_object' } });
    expect(ok.status, ok.raw).toBe(200);
    expect(ok.body.attempts).toBe(3);
    // The mock echoes the last user message: the gateway's feedback on the second invalid answer.
    expect(JSON.parse(ok.body.message.content).answer).toMatch(/^That answer does not match the required JSON format: the answer is not valid JSON/);
    const bad = await infer('plain [mock:wrong_json]', { response_format: { type: 'json_object' } });
    expectError(bad, 422, 'structured_output_failed');
    expect(bad.body.error.message).toContain('not a JSON object');
  });

  it('refuses a schema that is not a JSON Schema with 400 before calling the provider', async () => {
    const res = await infer('x', { response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'no-such-type' } } } });
    expectError(res, 400, 'invalid_request', 'response_format.json_schema.schema');
  });

  it('reads a schema declaring draft-07 (as zod-to-json-schema does) as 2020-12', async () => {
    const res = await infer('x [mock:wrong_json=1]', {
      response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { $schema: 'http://json-schema.org/draft-07/schema#', ...PERSON } } },
    });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.attempts).toBe(2);
  });

  it('carries attempts in the svc object of /v1/chat/completions', async () => {
    const res = await api.post('/v1/chat/completions', {
      model: 'mock-priced',
      messages: [{ role: 'user', content: 'hi [mock:wrong_json=1]' }],
      response_format: schemaFormat,
    });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.svc.attempts).toBe(2);
    expectError(
      await api.post('/v1/chat/completions', { model: 'mock-priced', messages: [{ role: 'user', content: 'hi [mock:bad_json]' }], response_format: schemaFormat }),
      422,
      'structured_output_failed',
    );
  });

  it('checks a stream at its end: an invalid answer ends it with a structured_output_failed error event', async () => {
    const good = await infer('who?', { stream: true });
    expect(good.status).toBe(200);
    const done = good.raw.split('\n\n').find((e) => e.startsWith('event: done'));
    expect(JSON.parse(done!.split('data: ')[1]!).attempts).toBe(1);

    const bad = await infer('who? [mock:wrong_json]', { stream: true });
    expect(bad.status).toBe(200);
    const events = bad.raw.split('\n\n').filter(Boolean);
    expect(events.some((e) => e.startsWith('event: done'))).toBe(false);
    const error = events.find((e) => e.startsWith('event: error'));
    expect(JSON.parse(error!.split('data: ')[1]!).error).toMatchObject({ code: 'structured_output_failed' });
  });
});
