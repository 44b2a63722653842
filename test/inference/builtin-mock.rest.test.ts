import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectOneOutcome, INFERENCE_KEYS, user } from './fixtures.ts';

let t: TestApp;
let api: Client;
let projectId: string;

beforeAll(async () => {
  // No SVC_PROVIDERS_FILE: the built-in mock provider serves inference at once (CONTRACT §1).
  t = await buildTestApp();
  const seeded = await seedProject(client(t.app));
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
});
afterAll(() => t.close());

describe('the built-in mock provider', () => {
  it('answers mock-1 with a deterministic echo at no cost', async () => {
    const res = await api.post('/v1/inference', { model: 'mock-1', project_id: projectId, messages: user('Hello there, gateway') });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(INFERENCE_KEYS);
    expect(res.body).toMatchObject({
      object: 'svc.inference',
      model: 'mock-1',
      route: 'mock/mock-1',
      region: 'local',
      cache_hit: false,
      message: { role: 'assistant', content: 'Hello there, gateway' },
      finish_reason: 'stop',
      cost_usd: 0,
      request_id: res.headers['x-svc-request-id'],
    });
    expect(res.body.id).toMatch(/^inf_/);
    expect(res.body.usage.total_tokens).toBe(res.body.usage.prompt_tokens + res.body.usage.completion_tokens);
    expect(res.body.usage.completion_tokens).toBeGreaterThan(0);
    const again = await api.post('/v1/inference', { model: 'mock-1', project_id: projectId, messages: user('Hello there, gateway') });
    expect(again.body.message).toEqual(res.body.message);
    expect(again.body.usage).toEqual(res.body.usage);
    await expectOneOutcome(t, res.body.request_id, { status: 'succeeded', route: 'mock/mock-1', region: 'local', costMicros: 0n });
  });

  it('routes model auto to the mock', async () => {
    const res = await api.post('/v1/inference', { model: 'auto', project_id: projectId, messages: user('auto please') });
    expect(res.status).toBe(200);
    expect(res.body.route).toBe('mock/mock-1');
  });

  it('cuts the echo at max_tokens with finish_reason length', async () => {
    const res = await api.post('/v1/inference', {
      model: 'mock-1',
      project_id: projectId,
      messages: user('a'.repeat(100)),
      max_tokens: 2,
    });
    expect(res.body.message.content).toBe('a'.repeat(8));
    expect(res.body.finish_reason).toBe('length');
  });
});
