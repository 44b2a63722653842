import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';

let t: TestApp;
let api: Client;
let created: string[] = [];

beforeAll(async () => {
  t = await buildTestApp();
  const seeded = await seedProject(client(t.app), { scopes: ['keys:manage', 'audit:read'] });
  api = client(t.app, seeded.secret);
  // 250 creates and many pages from one key on a frozen clock: lift the project's limits (starter: 60 requests/min).
  await client(t.app).put(`/v1/projects/${seeded.projectId}/rate-limits`, {
    requests_per_minute: 100_000,
    tokens_per_minute: 100_000,
    burst: 0,
  });
  created = [seeded.keyId];
  for (let i = 0; i < 249; i++) {
    const res = await api.post('/v1/keys', { project_id: seeded.projectId, name: `k${i}`, scopes: ['keys:manage'] });
    created.push(res.body.id);
  }
}, 120_000);
afterAll(() => t.close());

const ids = (res: { body: { data: { id: string }[] } }) => res.body.data.map((k) => k.id);

describe('cursor pagination over 250 keys', () => {
  it('walks forward with limit 100: each key exactly once, newest first', async () => {
    const newestFirst = [...created].reverse();
    const pages: string[][] = [];
    let cursor: string | undefined;
    for (;;) {
      const res = await api.get('/v1/keys', { query: { limit: 100, ...(cursor ? { starting_after: cursor } : {}) } });
      expect(res.status).toBe(200);
      pages.push(ids(res));
      expect(res.headers['x-svc-has-more']).toBe(String(res.body.has_more));
      if (!res.body.has_more) break;
      cursor = pages.at(-1)!.at(-1);
    }
    expect(pages.map((p) => p.length)).toEqual([100, 100, 50]);
    expect(pages.flat()).toEqual(newestFirst);
  });

  it('walks back with ending_before to the first page', async () => {
    const newestFirst = [...created].reverse();
    const last = await api.get('/v1/keys', { query: { limit: 100, starting_after: newestFirst[199]! } });
    expect(ids(last)).toEqual(newestFirst.slice(200));
    const middle = await api.get('/v1/keys', { query: { limit: 100, ending_before: newestFirst[200]! } });
    expect(ids(middle)).toEqual(newestFirst.slice(100, 200));
    expect(middle.body.has_more).toBe(true);
    const first = await api.get('/v1/keys', { query: { limit: 100, ending_before: newestFirst[100]! } });
    expect(ids(first)).toEqual(newestFirst.slice(0, 100));
    expect(first.body.has_more).toBe(false);
  });

  it('refuses both cursors at once', async () => {
    const res = await api.get('/v1/keys', { query: { starting_after: created[10]!, ending_before: created[5]! } });
    expectError(res, 400, 'invalid_request', 'ending_before');
  });

  it('refuses a cursor that names no object of the list', async () => {
    expectError(await api.get('/v1/keys', { query: { starting_after: 'key_nope' } }), 400, 'invalid_request', 'starting_after');
    expectError(await api.get('/v1/keys', { query: { ending_before: 'key_nope' } }), 400, 'invalid_request', 'ending_before');
  });

  for (const limit of ['0', '101', '-5', 'ten', '2.5', '1e1', ' 10', '10.0', '0x10']) {
    it(`refuses limit=${limit}`, async () => {
      expectError(await api.get('/v1/keys', { query: { limit } }), 400, 'invalid_request', 'limit');
    });
  }

  it('allows up to 500 on /v1/audit/events but not 501', async () => {
    const ok = await api.get('/v1/audit/events', { query: { limit: 500 } });
    expect(ok.status).toBe(200);
    expect(ok.headers['x-svc-page-limit']).toBe('500');
    expect(ok.body.data.length).toBeGreaterThan(100);
    expectError(await api.get('/v1/audit/events', { query: { limit: 501 } }), 400, 'invalid_request', 'limit');
  });
});
