import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, seedProject, type Client, type Seeded } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { chat, EMBED, PRICED, startGateway, type Gateway } from './support.ts';

/**
 * Every inbound protocol names the end customer the way its clients do (CONTRACT §22), checked with the official SDKs
 * against a listening gateway: OpenAI's `user` (chat, responses, embeddings), Anthropic's `metadata.user_id`, and the
 * X-Svc-Customer header (Gemini's SDK sends it as a custom header; any route takes it).
 */
let g: Gateway;
let origin: string;
let s: Seeded;
let api: Client;

beforeAll(async () => {
  g = await startGateway();
  await g.t.app.listen({ host: '127.0.0.1', port: 0 });
  origin = `http://127.0.0.1:${(g.t.app.server.address() as { port: number }).port}`;
  s = await seedProject(g.operator, { plan: 'growth', scopes: ['inference:write', 'usage:read', 'budgets:manage'] });
  api = client(g.t.app, s.secret);
}, 120_000);
afterAll(() => g.close());

/** The customers of the usage records of these request ids, in order. */
async function customersOf(requestIds: string[]): Promise<(string | null)[]> {
  await g.t.deps.outcomes.flush();
  const rows = await g.t.deps.db.usageRecord.findMany({ where: { requestId: { in: requestIds } }, select: { requestId: true, customer: true } });
  const by = new Map(rows.map((r) => [r.requestId, r.customer]));
  return requestIds.map((id) => (by.has(id) ? by.get(id)! : 'missing'));
}

const stopped = (customer: string) => api.put(`/v1/projects/${s.projectId}/customers/${customer}/budget`, { budget_usd: 0 });

describe('the OpenAI SDK: user', () => {
  const openai = () => new OpenAI({ baseURL: `${origin}/v1`, apiKey: s.secret, maxRetries: 0 });

  it('chat.completions, responses and embeddings record the customer; a stopped customer gets 429 with param customer', async () => {
    const c = await openai().chat.completions.create({ model: PRICED, user: 'oa_1', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    const r = await openai().responses.create({ model: PRICED, user: 'oa_1', input: 'hi' }).withResponse();
    const e = await openai().embeddings.create({ model: EMBED, user: 'oa_2', input: 'hi' }).withResponse();
    const ids = [c, r, e].map((x) => x.response.headers.get('x-svc-request-id')!);
    expect(await customersOf(ids)).toEqual(['oa_1', 'oa_1', 'oa_2']);

    await stopped('oa_3');
    const err = await openai()
      .chat.completions.create({ model: PRICED, user: 'oa_3', messages: [{ role: 'user', content: 'hi' }] })
      .catch((x: unknown) => x);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect([(err as InstanceType<typeof OpenAI.APIError>).code, (err as InstanceType<typeof OpenAI.APIError>).param]).toEqual(['budget_exceeded', 'customer']);
    const emb = await openai().embeddings.create({ model: EMBED, user: 'oa_3', input: 'hi' }).catch((x: unknown) => x);
    expect((emb as InstanceType<typeof OpenAI.APIError>).param).toBe('customer');
  });

  it('an invalid user is 400 invalid_request param user', async () => {
    const err = await openai()
      .chat.completions.create({ model: PRICED, user: 'tab\there', messages: [{ role: 'user', content: 'hi' }] })
      .catch((x: unknown) => x);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect([(err as InstanceType<typeof OpenAI.APIError>).code, (err as InstanceType<typeof OpenAI.APIError>).param]).toEqual(['invalid_request', 'user']);
    expectError(await chat(api, ''), 400, 'invalid_request', 'user');
    expectError(await chat(api, ' lead'), 400, 'invalid_request', 'user');
    expectError(await chat(api, 'x'.repeat(257)), 400, 'invalid_request', 'user');
    expect((await chat(api, 'x'.repeat(256))).status).toBe(200);
  });
});

describe('the Anthropic SDK: metadata.user_id', () => {
  const anthropic = () => new Anthropic({ baseURL: origin, apiKey: s.secret, maxRetries: 0 });

  it('records the customer; a stopped customer gets Anthropic\'s 429 with svc_code and param customer', async () => {
    const ok = await anthropic().messages.create({ model: PRICED, max_tokens: 16, metadata: { user_id: 'an_1' }, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(await customersOf([ok.response.headers.get('x-svc-request-id')!])).toEqual(['an_1']);

    await stopped('an_2');
    const err = await anthropic()
      .messages.create({ model: PRICED, max_tokens: 16, metadata: { user_id: 'an_2' }, messages: [{ role: 'user', content: 'hi' }] })
      .catch((x: unknown) => x);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
      type: 'error',
      error: { type: 'billing_error', svc_code: 'budget_exceeded', param: 'customer' },
    });
  });

  it('an invalid metadata.user_id is 400 naming metadata.user_id', async () => {
    const err = await anthropic()
      .messages.create({ model: PRICED, max_tokens: 16, metadata: { user_id: 'bad\nid' }, messages: [{ role: 'user', content: 'hi' }] })
      .catch((x: unknown) => x);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ error: { svc_code: 'invalid_request', param: 'metadata.user_id' } });
  });
});

describe('X-Svc-Customer on any route', () => {
  it('the Gemini SDK sends it as a header: generateContent and embedContent record the customer, a stopped one gets 429', async () => {
    const genai = (customer: string) => new GoogleGenAI({ apiKey: s.secret, httpOptions: { baseUrl: origin, headers: { 'X-Svc-Customer': customer } } });
    const gen = await genai('ge_1').models.generateContent({ model: PRICED, contents: 'hi' });
    const emb = await genai('ge_1').models.embedContent({ model: EMBED, contents: 'hi' });
    const ids = [gen, emb].map((r) => r.sdkHttpResponse!.headers!['x-svc-request-id']!);
    expect(await customersOf(ids)).toEqual(['ge_1', 'ge_1']);

    await stopped('ge_2');
    const err = await genai('ge_2').models.generateContent({ model: PRICED, contents: 'hi' }).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(429);
    expect((err as ApiError).message).toMatch(/customer's monthly budget/);
  });

  it('wins over the body\'s user (which still goes to the provider as sent); an invalid header is 400 param X-Svc-Customer', async () => {
    const both = await chat(api, 'body_user', { 'X-Svc-Customer': 'header_customer' });
    expect(both.status).toBe(200);
    expect(await customersOf([both.headers['x-svc-request-id'] as string])).toEqual(['header_customer']);
    const native = await api.post('/v1/inference', { model: PRICED, project_id: s.projectId, messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'X-Svc-Customer': 'native_1' } });
    expect(await customersOf([native.headers['x-svc-request-id'] as string])).toEqual(['native_1']);
    expectError(await chat(api, undefined, { 'X-Svc-Customer': ' ' }), 400, 'invalid_request', 'X-Svc-Customer');
    expectError(await chat(api, 'fine', { 'X-Svc-Customer': 'x'.repeat(300) }), 400, 'invalid_request', 'X-Svc-Customer');
    // Not an inference: the header is not looked at.
    expect((await api.get('/v1/usage', { headers: { 'X-Svc-Customer': ' ' } })).status).toBe(200);
  });
});
