import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ERRORS } from '../../src/errors/codes.ts';
import { MASTER_KEY, buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp({ env: { SVC_BODY_LIMIT_BYTES: '2048' } });
  operator = client(t.app);
});
afterAll(() => t.close());

describe('the error object', () => {
  it('answers malformed JSON with invalid_request', async () => {
    expectError(await operator.post('/v1/projects', '{"name": '), 400, 'invalid_request', null);
  });

  it('answers a body over the limit with 413 invalid_request', async () => {
    const res = await operator.post('/v1/projects', { name: 'x'.repeat(4096) });
    expectError(res, 413, 'invalid_request', null);
  });

  it('answers an unknown route with 404 not_found', async () => {
    expectError(await operator.get('/v1/nothing-here'), 404, 'not_found', null);
    expectError(await operator.post('/v2/keys', {}), 404, 'not_found', null);
  });

  it('answers an unexpected failure with 500 internal_error and no internals', async () => {
    const spy = vi.spyOn(t.deps.db.project, 'findMany').mockRejectedValueOnce(new Error('db exploded at /srv/secret/path.ts:42'));
    try {
      const res = await operator.get('/v1/projects');
      expectError(res, 500, 'internal_error', null);
      expect(res.raw).not.toContain('exploded');
      expect(res.raw).not.toContain('path.ts');
      expect(res.body.error.message).toBe(ERRORS.internal_error.message);
      expect(t.logs.text).toContain('db exploded'); // logged for the operator, with its stack
    } finally {
      spy.mockRestore();
    }
  });

  it('sets X-Svc-Request-Id on successes too, a new one per request', async () => {
    const a = await operator.get('/v1/projects');
    const b = await operator.get('/v1/projects');
    expect(a.headers['x-svc-request-id']).toMatch(/^req_[0-9a-z]{26}$/);
    expect(a.headers['x-svc-request-id']).not.toBe(b.headers['x-svc-request-id']);
  });

  it('links doc_url to the error page the gateway serves', async () => {
    const res = await operator.get('/v1/keys/key_x');
    const url = new URL(res.body.error.doc_url);
    expect(url.pathname).toBe('/docs/errors');
    expect(url.hash).toBe('#not_found');
    const page = await t.app.inject({ method: 'GET', url: '/docs/errors' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    for (const code of Object.keys(ERRORS)) expect(page.body).toContain(`id="${code}"`);
  });

  it('accepts an empty JSON body on a POST without fields', async () => {
    const { keyId } = await seedProject(operator);
    const res = await t.app.inject({
      method: 'POST',
      url: `/v1/keys/${keyId}/revoke`,
      headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' },
      payload: '',
    });
    expect(res.statusCode).toBe(200);
  });
});

describe('health', () => {
  it('serves /healthz and /readyz without a key', async () => {
    const h = await client(t.app, '').get('/healthz', { key: null });
    expect(h.status).toBe(200);
    expect(h.body).toEqual({ status: 'ok' });
    const r = await client(t.app, '').get('/readyz', { key: null });
    expect(r.status).toBe(200);
    expect(r.body.checks.database).toBe('ok');
  });
});
