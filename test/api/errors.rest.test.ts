import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ERRORS } from '../../src/errors/codes.ts';
import { MASTER_KEY, buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { gqlClient } from '../graphql/gql.ts';

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

  it('identifies a caller with a key on an unknown route: identity and rate-limit headers on the 404', async () => {
    const { projectId, keyId, secret } = await seedProject(operator);
    const res = await client(t.app, secret).get('/v1/nothing-here');
    expectError(res, 404, 'not_found', null);
    expect(res.headers).toMatchObject({ 'x-svc-key-id': keyId, 'x-svc-project': projectId, 'x-svc-ratelimit-resource': 'requests' });
    expect(res.headers['x-svc-scopes']).toContain('keys:manage');
    // A key that does not authenticate changes nothing: the route does not exist.
    const bad = await client(t.app, 'svc_sk_not_a_key').get('/v1/nothing-here');
    expectError(bad, 404, 'not_found', null);
    expect(bad.headers['x-svc-key-id']).toBeUndefined();
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
      // …on a line bound to the request (the request's logger is made when it first logs: lazyRequestLogger in api/app.ts).
      const line = JSON.parse(t.logs.lines.find((l) => l.includes('db exploded'))!);
      expect(line).toMatchObject({ level: 50, reqId: res.body.error.request_id, msg: 'unexpected error' });
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

describe('input the router or the database cannot take', () => {
  it('answers a URL with bad percent-encoding with the error object, not fastify\'s', async () => {
    const res = await operator.get('/v1/keys/%ZZ');
    expectError(res, 400, 'invalid_request', null);
  });

  it('answers an id longer than any id with 404 not_found', async () => {
    expectError(await operator.get(`/v1/keys/key_${'x'.repeat(120)}`), 404, 'not_found', null);
  });

  it('answers a NUL character in a path id with 404 not_found naming the parameter', async () => {
    expectError(await operator.get('/v1/keys/key_%00'), 404, 'not_found', 'key_id');
    expectError(await operator.post('/v1/keys/%00/revoke', {}), 404, 'not_found', 'key_id');
    expectError(await operator.get('/v1/webhooks/wh_%00/deliveries'), 404, 'not_found', 'webhook_id');
  });

  it('answers a NUL character in a query or body field with 400 invalid_request naming the field', async () => {
    const { projectId } = await seedProject(operator);
    expectError(await operator.get(`/v1/keys?project_id=${projectId}&starting_after=%00`), 400, 'invalid_request', 'starting_after');
    expectError(await operator.get('/v1/audit/events?action=key.%00'), 400, 'invalid_request', 'action');
    const res = await operator.post('/v1/keys', { project_id: projectId, name: 'a\u0000b', scopes: ['audit:read'] });
    expectError(res, 400, 'invalid_request', 'name');
    expect(await t.deps.db.apiKey.count({ where: { projectId } })).toBe(1); // only the seeded key
  });

  it('passes a NUL character in chat message content on to the provider (nothing of it is stored)', async () => {
    const { projectId, secret } = await seedProject(operator);
    const res = await client(t.app, secret).post('/v1/inference', {
      project_id: projectId,
      model: 'auto',
      messages: [{ role: 'user', content: 'a\u0000b' }],
    });
    expect(res.status).toBe(200);
  });

  it('answers a NUL character in a GraphQL argument with invalid_request, not internal_error', async () => {
    const unexpected = () => t.logs.lines.filter((l) => l.includes('unexpected error')).length;
    const before = unexpected();
    const res = await gqlClient(t.app)('query($id: ID!) { key(id: $id) { id } }', { id: 'key_\u0000' });
    expect(res.body.errors[0].extensions).toMatchObject({ code: 'invalid_request', http_status: 400 });
    expect(unexpected()).toBe(before); // a client error, not logged as a failure
  });

  it('refuses unknown query parameters and body fields on routes that take none', async () => {
    const { projectId, keyId } = await seedProject(operator);
    expectError(await operator.get(`/v1/keys/${keyId}?foo=1`), 400, 'invalid_request', 'foo');
    expectError(await operator.post(`/v1/keys/${keyId}/revoke`, { foo: 1 }), 400, 'invalid_request', 'foo');
    expectError(await operator.post(`/v1/keys/${keyId}/revoke`, [1]), 400, 'invalid_request');
    expect((await operator.get(`/v1/keys/${keyId}`)).body.status).toBe('active');
    // project_id names the project on any call (CONTRACT §2), so it is always allowed.
    expect((await operator.get(`/v1/keys/${keyId}?project_id=${projectId}`)).status).toBe(200);
  });
});

describe('requests Node\'s HTTP parser refuses (a real socket, not inject)', () => {
  /** Sends raw bytes, returns everything the server wrote before closing. */
  async function raw(text: string): Promise<string> {
    const address = t.app.server.address();
    const port = typeof address === 'object' && address ? address.port : Number((await t.app.listen({ port: 0, host: '127.0.0.1' })).split(':').pop());
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
      let out = '';
      socket.on('data', (d) => (out += d));
      socket.on('close', () => resolve(out));
      socket.on('error', reject);
      socket.setTimeout(10_000, () => socket.destroy(new Error('no answer')));
    });
  }
  const parse = (res: string) => {
    const [head, body] = res.split('\r\n\r\n');
    const status = Number(head!.split(' ')[1]);
    const id = /x-svc-request-id: (\S+)/i.exec(head!)?.[1];
    return { status, id, body: JSON.parse(body!) };
  };

  it('answers an unknown method, a malformed header and an oversized header section with the error object', async () => {
    for (const [request, status] of [
      ['FOO /v1/keys HTTP/1.1\r\nHost: x\r\n\r\n', 400],
      ['GET /v1/keys HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n', 400],
      [`GET /v1/keys?starting_after=${'a'.repeat(17_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431],
      ['CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 400],
    ] as const) {
      const res = parse(await raw(request));
      expect({ request: request.slice(0, 30), status: res.status }).toEqual({ request: request.slice(0, 30), status });
      expect(res.body.error).toMatchObject({ type: 'svc.error', code: 'invalid_request', param: null });
      expect(res.body.error.request_id).toBe(res.id);
    }
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
