import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MASTER_KEY, buildTestApp, client, createTestDatabase, seedProject, type Client, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { expectGqlError, gqlClient, type Gql } from './gql.ts';
import { lastUsedWritten } from '../helpers/sql-log.ts';

let db: TestDatabase;
let t: TestApp;
let operator: Client;
let gql: Gql;
let statements: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase({ log: true });
  db.database.prisma.$on('query' as never, (e: { query: string }) => statements.push(e.query));
  t = await buildTestApp({ database: db });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

describe('HTTP', () => {
  it('carries the identity, request id and rate-limit headers of the key', async () => {
    const { projectId, keyId, secret } = await seedProject(operator, { scopes: ['keys:manage', 'usage:read'] });
    const res = await gql('{ viewer { keyId } }', {}, { key: secret });
    expect(res.status).toBe(200);
    expect(res.headers['x-svc-key-id']).toBe(keyId);
    expect(res.headers['x-svc-project']).toBe(projectId);
    expect(res.headers['x-svc-scopes']).toBe('keys:manage usage:read');
    expect(res.headers['x-svc-request-id']).toMatch(/^req_[0-9a-z]{26}$/);
    expect(res.headers['x-svc-ratelimit-limit']).toBeDefined();
    expect(res.headers['x-svc-ratelimit-remaining']).toBeDefined();
    expect(res.headers['content-type']).toMatch(/^application\/graphql-response\+json/);
  });

  it('names the project the operator addressed in X-Svc-Project', async () => {
    const { projectId } = await seedProject(operator);
    const res = await gql(`{ project(id: "${projectId}") { id } }`);
    expect(res.headers['x-svc-key-id']).toBe('key_master');
    expect(res.headers['x-svc-project']).toBe(projectId);
  });

  it('takes one request from the windows per GraphQL request: the third of 2/min is 429 in the REST shape', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ['governance:manage'] });
    await operator.put(`/v1/projects/${projectId}/rate-limits`, { requests_per_minute: 2, tokens_per_minute: 1000, burst: 0 });
    expect((await gql('{ viewer { keyId } }', {}, { key: secret })).status).toBe(200);
    expect((await gql('{ viewer { keyId } }', {}, { key: secret })).status).toBe(200);
    const third = await gql('{ viewer { keyId } }', {}, { key: secret });
    expect(third.status).toBe(429);
    expect(third.body.error).toMatchObject({ type: 'svc.error', code: 'rate_limit_exceeded' });
    expect(third.headers['x-svc-ratelimit-reset']).toBeDefined();
  });

  it('answers execution errors with 200 and errors[], and request errors with 400', async () => {
    const failed = await gql('{ key(id: "key_nope") { id } viewer { keyId } }');
    expect(failed.status).toBe(200);
    expect(failed.body.data).toEqual({ key: null, viewer: { keyId: 'key_master' } });
    expectGqlError(failed, 'not_found', { httpStatus: 404, param: 'key_id', path: ['key'] });

    const syntax = await gql('{ viewer { keyId }');
    expect(syntax.status).toBe(400);
    expectGqlError(syntax, 'invalid_request', { httpStatus: 400, param: null });

    const unknownField = await gql('{ viewer { secretSauce } }');
    expect(unknownField.status).toBe(400);
    expectGqlError(unknownField, 'invalid_request', { httpStatus: 400 });

    const badVariable = await gql('query($n: Int) { keys(first: $n) { edges { cursor } } }', { n: 'ten' });
    expect(badVariable.status).toBe(400);
    expectGqlError(badVariable, 'invalid_request', { httpStatus: 400 });
  });

  it('refuses mutations over GET (405) and serves queries over GET', async () => {
    const get = (query: string, accept = 'application/json') =>
      t.app.inject({ method: 'GET', url: '/graphql', query: { query }, headers: { authorization: `Bearer ${MASTER_KEY}`, accept } });
    const q = await get('{ viewer { keyId } }');
    expect(q.statusCode).toBe(200);
    expect(JSON.parse(q.body).data.viewer.keyId).toBe('key_master');
    const m = await get('mutation { createProject(input: { name: "x" }) { id } }');
    expect(m.statusCode).toBe(405);
    expect(JSON.parse(m.body).errors[0].extensions).toMatchObject({ code: 'invalid_request', http_status: 405 });
    expect(m.headers['x-svc-request-id']).toMatch(/^req_/);
  });

  it('masks unexpected errors as internal_error and logs them', async () => {
    const spy = vi.spyOn(t.deps.db.auditEvent, 'findMany').mockRejectedValueOnce(new Error('connection reset by peer at 10.0.0.7'));
    try {
      const res = await gql('{ auditEvents { edges { cursor } } }');
      expect(res.status).toBe(200);
      const err = expectGqlError(res, 'internal_error', { httpStatus: 500, param: null });
      expect(err.message).not.toContain('10.0.0.7');
      expect(res.raw).not.toContain('connection reset');
      expect(t.logs.text).toContain('connection reset by peer');
    } finally {
      spy.mockRestore();
    }
  });

  it('answers a SyntaxError inside a resolver as internal_error and logs it (only request parsing is the client\'s)', async () => {
    const spy = vi.spyOn(t.deps.db.auditEvent, 'findMany').mockRejectedValueOnce(new SyntaxError('Unexpected token in stored JSON at 0xdeadbeef'));
    try {
      const res = await gql('{ auditEvents { edges { cursor } } }');
      expectGqlError(res, 'internal_error', { httpStatus: 500, param: null });
      expect(res.raw).not.toContain('0xdeadbeef');
      expect(t.logs.text).toContain('0xdeadbeef');
    } finally {
      spy.mockRestore();
    }
  });
});

describe('Idempotency-Key on POST /graphql', () => {
  it("scopes the operator's key by the project its arguments name, as REST scopes it by project_id", async () => {
    const a = await seedProject(operator);
    const b = await seedProject(operator);
    const headers = { 'idempotency-key': `op-scope-${a.projectId}` };
    const viaVariables = (projectId: string) =>
      gql(`mutation($i: CreateKeyInput!) { createKey(input: $i) { key { projectId } } }`, { i: { projectId, name: 'per-project', scopes: ['usage:read'] } }, { headers });
    const first = await viaVariables(a.projectId);
    const second = await viaVariables(b.projectId);
    for (const [res, projectId] of [[first, a.projectId], [second, b.projectId]] as const) {
      expect(res.headers['idempotent-replayed']).toBeUndefined();
      expect(res.body.data.createKey.key.projectId).toBe(projectId);
    }
    // A literal argument counts too; the same request again in project A is replayed.
    const literal = (projectId: string) =>
      gql(`mutation { createKey(input: { projectId: "${projectId}", name: "literal", scopes: ["usage:read"] }) { key { projectId } } }`, {}, { headers: { 'idempotency-key': 'op-literal' } });
    expect((await literal(a.projectId)).body.data.createKey.key.projectId).toBe(a.projectId);
    expect((await literal(b.projectId)).body.data.createKey.key.projectId).toBe(b.projectId);
    const replayed = await viaVariables(a.projectId);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.headers['x-svc-project']).toBe(a.projectId);
  });

  it('replays a mutation retried with the same key and body, and refuses the key with another body', async () => {
    const { projectId } = await seedProject(operator);
    const create = (name: string) =>
      gql(`mutation($i: CreateKeyInput!) { createKey(input: $i) { secret key { id } } }`, { i: { projectId, name, scopes: ['usage:read'] } }, {
        headers: { 'idempotency-key': `gql-${projectId}` },
      });
    const first = await create('once');
    const again = await create('once');
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    const keys = await operator.get('/v1/keys', { query: { project_id: projectId } });
    expect(keys.body.data.filter((k: any) => k.name === 'once')).toHaveLength(1);

    // A replayed error keeps its request id: the header still equals extensions.request_id.
    const bad = () =>
      gql(`mutation($i: CreateKeyInput!) { createKey(input: $i) { secret } }`, { i: { projectId, name: 'bad', scopes: ['nope'] } }, {
        headers: { 'idempotency-key': `gql-bad-${projectId}` },
      });
    const failed = await bad();
    const replayed = await bad();
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body.errors[0].extensions.request_id).toBe(failed.body.errors[0].extensions.request_id);
    expect(replayed.headers['x-svc-request-id']).toBe(replayed.body.errors[0].extensions.request_id);

    const other = await create('twice');
    expect(other.status).toBe(409);
    expect(other.body.error).toMatchObject({ code: 'idempotency_conflict', param: 'Idempotency-Key' });
  });
});

describe('protection', () => {
  const deliveriesOf = (inner: string) => `deliveries { edges { node { ${inner} } } }`;

  it('refuses a too-deep query before executing it', async () => {
    const { secret } = await seedProject(operator, { scopes: ['keys:manage', 'governance:manage'] });
    // webhooks → edges → node → deliveries → edges → node → webhook → url: depth 8, allowed.
    const ok = await gql(`{ keys { edges { cursor } } webhooks { edges { node { ${deliveriesOf('webhook { url }')} } } } }`, {}, { key: secret });
    expect(ok.body.errors).toBeUndefined();
    await lastUsedWritten(statements);

    statements = [];
    // … → webhook → deliveries → edges → node → id: depth 11.
    const deep = await gql(
      `{ keys { edges { cursor } } webhooks { edges { node { ${deliveriesOf(`webhook { ${deliveriesOf('id')} }`)} } } } }`,
      {},
      { key: secret },
    );
    expect(deep.status).toBe(400);
    const err = expectGqlError(deep, 'invalid_request', { httpStatus: 400, param: null });
    expect(err.message).toBe('Query depth limit of 10 exceeded, found 11.');
    expect(deep.body.data).toBeUndefined();
    // Nothing ran: no SQL at all, so not even the key.list audit row the keys field would have written.
    expect(statements).toEqual([]);
  });

  it('refuses more than 15 aliases before executing anything (one request counts once in the rate limits)', async () => {
    const aliased = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: keys(first: 1) { edges { cursor } }`).join(' ')} }`;
    const ok = await gql(aliased(15));
    expect(ok.body.errors, ok.raw).toBeUndefined();
    statements = [];
    const many = await gql(aliased(3000));
    expect(many.status).toBe(400);
    const err = expectGqlError(many, 'invalid_request', { httpStatus: 400, param: null });
    expect(err.message).toMatch(/aliases/i);
    expect(many.body.data).toBeUndefined();
    expect(statements).toEqual([]);
    // Mutations too.
    const mutations = await gql(`mutation { ${Array.from({ length: 16 }, (_, i) => `m${i}: revokeKey(id: "key_nope${i}") { id }`).join(' ')} }`);
    expect(mutations.status).toBe(400);
    expectGqlError(mutations, 'invalid_request', { httpStatus: 400 });
  });

  it('refuses a too-costly query before executing it, page sizes in variables included', async () => {
    const HEAVY = `webhooks(first: $a) { edges { node { deliveries(first: $b) { edges { node { id event { id type } attemptLog { attempt } } } } } } }`;
    statements = [];
    const literal = await gql(`{ keys { edges { cursor } } ${HEAVY.replace('$a', '100').replace('$b', '100')} }`);
    expect(literal.status).toBe(400);
    const err = expectGqlError(literal, 'invalid_request', { httpStatus: 400 });
    expect(err.message).toMatch(/^Query Cost limit of 100000 exceeded, found [\d.]+\.$/);

    const viaVariables = await gql(`query($a: Int, $b: Int) { keys { edges { cursor } } ${HEAVY} }`, { a: 100, b: 100 });
    expect(viaVariables.status).toBe(400);
    expectGqlError(viaVariables, 'invalid_request', { httpStatus: 400 });
    // A variable's default counts when the variable is not sent: the operation's own, not another operation's.
    const viaDefaults = await gql(`query($a: Int = 100, $b: Int = 100) { keys { edges { cursor } } ${HEAVY} }`, {});
    expect(viaDefaults.status).toBe(400);
    expectGqlError(viaDefaults, 'invalid_request', { httpStatus: 400 });
    const twoOperations = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'application/json', accept: 'application/json' },
      payload: JSON.stringify({
        query: `query Big($a: Int = 100, $b: Int = 100) { keys { edges { cursor } } ${HEAVY} } query Small($a: Int = 1, $b: Int = 1) { ${HEAVY} }`,
        operationName: 'Big',
      }),
    });
    expect(JSON.parse(twoOperations.body).errors?.[0]?.message).toMatch(/^Query Cost limit of 100000 exceeded/);
    expect(statements).toEqual([]);

    // The same query with small pages runs.
    const small = await gql(`query($a: Int, $b: Int) { ${HEAVY} }`, { a: 5, b: 5 });
    expect(small.body.errors).toBeUndefined();
  });

  it('serves introspection outside production (configurable)', async () => {
    const res = await gql('{ __schema { queryType { name } } }');
    expect(res.body.data.__schema.queryType.name).toBe('Query');
  });
});

describe('GraphiQL and introspection', () => {
  const html = (app: TestApp['app'], url: string, key: string | null) =>
    app.inject({ method: 'GET', url, headers: { accept: 'text/html', ...(key ? { authorization: `Bearer ${key}` } : {}) } });

  it('serves GraphiQL outside production: on GET /graphql with a key, and on the public /graphiql page', async () => {
    const withKey = await html(t.app, '/graphql', MASTER_KEY);
    expect(withKey.statusCode).toBe(200);
    expect(withKey.headers['content-type']).toMatch(/^text\/html/);
    expect(withKey.body).toContain('GraphiQL');
    const page = await html(t.app, '/graphiql', null);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('svc gateway GraphQL');
    expect(page.body).not.toContain(MASTER_KEY);
    // A browser's GET of /graphql loads the page with no key too (issue 36); the queries it sends still need one.
    expect((await html(t.app, '/graphql', null)).statusCode).toBe(200);
  });

  it('answers a JSON client (Accept: application/json) with 200 and errors, as GraphQL over HTTP allows', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'application/json', accept: 'application/json' },
      payload: JSON.stringify({ query: '{ viewer { nope } }' }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(res.body).errors[0].extensions.code).toBe('invalid_request');

    const badVariable = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'application/json', accept: 'application/json' },
      payload: JSON.stringify({ query: 'query($n: Int) { keys(first: $n) { edges { cursor } } }', variables: { n: 'ten' } }),
    });
    expect(badVariable.statusCode).toBe(200);
    expect(JSON.parse(badVariable.body).errors[0].extensions).toMatchObject({ code: 'invalid_request', http_status: 400 });
  });

  it('answers bodies and parameters that are not a GraphQL request with invalid_request, never internal_error', async () => {
    const unexpected = () => t.logs.lines.filter((l) => l.includes('graphql: unexpected error')).length;
    const before = unexpected();
    for (const payload of ['{}', '[]', 'null', '1']) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/graphql',
        headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' },
        payload,
      });
      expect({ payload, status: res.statusCode }).toEqual({ payload, status: 400 });
      const body = JSON.parse(res.body);
      expect(body.errors[0].extensions).toEqual(expect.objectContaining({ code: 'invalid_request', request_id: res.headers['x-svc-request-id'] }));
      expect(body.errors[0].extensions.originalError).toBeUndefined();
    }
    const get = await t.app.inject({
      method: 'GET',
      url: '/graphql',
      query: { query: '{ viewer { keyId } }', variables: 'x' },
      headers: { authorization: `Bearer ${MASTER_KEY}`, accept: 'application/json' },
    });
    expect(JSON.parse(get.body).errors[0].extensions).toMatchObject({ code: 'invalid_request' });
    const html = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'application/json', accept: 'text/html' },
      payload: JSON.stringify({ query: '{ viewer { keyId } }' }),
    });
    expect(html.statusCode).toBe(406);
    expect(JSON.parse(html.body).errors[0].extensions).toMatchObject({ code: 'invalid_request', http_status: 406 });
    expect(unexpected()).toBe(before); // client errors, not logged as failures
  });

  it('answers a body that is not JSON with 415 and the error in GraphQL\'s shape', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'text/plain', accept: 'application/json' },
      payload: JSON.stringify({ query: '{ viewer { keyId } }' }),
    });
    expect(res.statusCode).toBe(415);
    const body = JSON.parse(res.body);
    expect(body.errors[0].extensions).toMatchObject({ code: 'invalid_request', http_status: 415, request_id: res.headers['x-svc-request-id'] });
  });

  it('takes the query as application/graphql, and answers other media types and invalid JSON in GraphQL\'s shape', async () => {
    const post = (contentType: string, payload: string) =>
      t.app.inject({
        method: 'POST',
        url: '/graphql',
        headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': contentType, accept: 'application/json' },
        payload,
      });
    const asGraphql = await post('application/graphql', '{ viewer { keyId } }');
    expect(asGraphql.statusCode).toBe(200);
    expect(JSON.parse(asGraphql.body)).toEqual({ data: { viewer: { keyId: 'key_master' } } });

    for (const type of ['application/xml', 'application/octet-stream']) {
      const res = await post(type, '<query/>');
      expect(res.statusCode, type).toBe(415);
      expect(JSON.parse(res.body).errors[0].extensions).toMatchObject({ code: 'invalid_request', http_status: 415, request_id: res.headers['x-svc-request-id'] });
    }

    const broken = await post('application/json', '{"query":');
    expect(broken.statusCode).toBe(400);
    const body = JSON.parse(broken.body);
    expect(body.error).toBeUndefined();
    expect(body.errors[0].message).toBe('The body is not valid JSON.');
    expect(body.errors[0].extensions).toMatchObject({ code: 'invalid_request', http_status: 400, request_id: broken.headers['x-svc-request-id'] });
  });

  it('keeps no Idempotency-Key result whose errors are 5xx: a retry runs again, as on REST', async () => {
    await seedProject(operator);
    const headers = { 'idempotency-key': 'gql-5xx-retry' };
    const query = '{ keys(first: 1) { edges { cursor } } }';
    const spy = vi.spyOn(t.deps.db.apiKey, 'findMany').mockRejectedValueOnce(new Error('the database fell over'));
    try {
      const failed = await gql(query, {}, { headers });
      expectGqlError(failed, 'internal_error', { httpStatus: 500 });
    } finally {
      spy.mockRestore();
    }
    const retried = await gql(query, {}, { headers });
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(retried.body.errors).toBeUndefined();
    expect(retried.body.data.keys.edges).toHaveLength(1);
    // That answer is kept and replayed.
    const replayed = await gql(query, {}, { headers });
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body).toEqual(retried.body);
  });

  it('grants no cross-origin access, as /v1 does not', async () => {
    const headers = { origin: 'https://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' };
    const preflight = await t.app.inject({ method: 'OPTIONS', url: '/graphql', headers });
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    expect(preflight.headers['access-control-allow-credentials']).toBeUndefined();
    const res = await t.app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { ...headers, authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ query: '{ viewer { keyId } }' }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('in production: no GraphiQL and no introspection', async () => {
    const prod = await buildTestApp({ database: db, env: { NODE_ENV: 'production' } });
    try {
      expect((await html(prod.app, '/graphiql', null)).statusCode).toBe(404);
      const page = await html(prod.app, '/graphql', MASTER_KEY);
      expect(page.headers['content-type'] ?? '').not.toMatch(/^text\/html/);
      const res = await gqlClient(prod.app)('{ __schema { queryType { name } } }');
      expect(res.status).toBe(400);
      expectGqlError(res, 'invalid_request', { httpStatus: 400 });
      expect(res.body.errors[0].message).toMatch(/introspection/i);
      // Ordinary queries still work.
      expect((await gqlClient(prod.app)('{ viewer { keyId } }')).body.data.viewer.keyId).toBe('key_master');
    } finally {
      await prod.close();
    }
  });

  it('turns introspection off with SVC_GRAPHQL_INTROSPECTION=false', async () => {
    const off = await buildTestApp({ database: db, env: { SVC_GRAPHQL_INTROSPECTION: 'false' } });
    try {
      const res = await gqlClient(off.app)('{ __type(name: "ApiKey") { name } }');
      expectGqlError(res, 'invalid_request', { httpStatus: 400 });
    } finally {
      await off.close();
    }
  });
});

describe('hardening (issue 14)', () => {
  const CREATE_KEY = `mutation($i: CreateKeyInput!) { createKey(input: $i) { secret key { id } } }`;

  it('replays an Idempotency-Key only to the key that made the first request; another key of the project gets 409', async () => {
    const scopes = ['keys:manage', 'usage:read'];
    const { projectId, secret } = await seedProject(operator, { scopes });
    const twin = await operator.post('/v1/keys', { project_id: projectId, name: 'gql-twin', scopes });
    const headers = { 'idempotency-key': 'gql-owner-only' };
    const vars = { i: { projectId, name: 'made-by-first', scopes: ['usage:read'] } };
    const first = await gql(CREATE_KEY, vars, { key: secret, headers });
    expect(first.body.data?.createKey?.secret, first.raw).toMatch(/^svc_sk_/);

    const other = await gql(CREATE_KEY, vars, { key: twin.body.secret, headers });
    expect(other.status).toBe(409);
    expect(other.body.error).toMatchObject({ code: 'idempotency_conflict', param: 'Idempotency-Key' });
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(other.raw).not.toContain(first.body.data.createKey.secret);
    // Nor the operator.
    const byOperator = await gql(CREATE_KEY, vars, { headers });
    expect(byOperator.status).toBe(409);
    expect(byOperator.raw).not.toContain(first.body.data.createKey.secret);

    const own = await gql(CREATE_KEY, vars, { key: secret, headers });
    expect(own.headers['idempotent-replayed']).toBe('true');
    expect(own.body).toEqual(first.body);
  });

  it('answers JSON nested 100,000 levels with an Idempotency-Key as without it (400 invalid_request), never 500', async () => {
    const deepArray = '['.repeat(100_000) + ']'.repeat(100_000);
    const deepObject = '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000);
    const post = (payload: string, idem?: string) =>
      t.app.inject({
        method: 'POST',
        url: '/graphql',
        headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'application/json', ...(idem ? { 'idempotency-key': idem } : {}) },
        payload,
      });
    for (const [name, payload] of [
      ['array', deepArray],
      ['object', deepObject],
      ['query', `{"query":${deepArray}}`],
    ] as const) {
      const without = await post(payload);
      const withKey = await post(payload, `deep-${name}`);
      expect({ name, status: withKey.statusCode }).toEqual({ name, status: 400 });
      const err = JSON.parse(withKey.body).errors[0];
      expect(err.extensions).toMatchObject({ code: 'invalid_request', http_status: 400, request_id: withKey.headers['x-svc-request-id'] });
      expect(err.message).toBe(JSON.parse(without.body).errors[0].message);
    }
    // Unused deep variables are ignored by GraphQL, with or without the header.
    const vars = `{"query":"{ viewer { keyId } }","variables":{"a":${deepArray}}}`;
    const ran = await post(vars, 'deep-vars');
    expect(ran.statusCode).toBe(200);
    expect(JSON.parse(ran.body)).toEqual({ data: { viewer: { keyId: 'key_master' } } });
    expect(t.logs.text).not.toMatch(/Maximum call stack|RangeError/);
  });

  it('names no field in suggestions when introspection is off (they would leak the schema)', async () => {
    const probes: [string, Record<string, unknown>][] = [
      ['{ kees { edges { cursor } } }', {}], // unknown root field
      ['{ viewer { keyid } }', {}], // unknown field
      ['{ keys(frist: 1) { edges { cursor } } }', {}], // unknown argument
      ['query($i: CreatKeyInput!) { viewer { keyId } }', {}], // unknown type
      [CREATE_KEY, { i: { projectid: 'prj_x', name: 'n', scopes: ['usage:read'] } }], // unknown input field (variables)
    ];
    // Outside production graphql-js suggests names: what the production setting must take away.
    const dev = await gql(probes[0]![0]);
    expect(dev.body.errors[0].message).toMatch(/Did you mean "keys"/);

    const prod = await buildTestApp({ database: db, env: { NODE_ENV: 'production' } });
    const off = await buildTestApp({ database: db, env: { SVC_GRAPHQL_INTROSPECTION: 'false' } });
    try {
      for (const app of [prod.app, off.app]) {
        for (const [query, variables] of probes) {
          const res = await gqlClient(app)(query, variables);
          expect(res.status, query).toBe(400);
          const err = expectGqlError(res, 'invalid_request', { httpStatus: 400 });
          expect(res.raw).not.toMatch(/Did you mean/i);
          // No name the client did not write itself.
          for (const name of ['keys', 'keyId', 'first', 'CreateKeyInput', 'projectId'].filter((n) => !query.includes(n))) {
            expect(err.message, query).not.toContain(`"${name}"`);
          }
        }
      }
      const unknown = await gqlClient(prod.app)('{ kees { edges { cursor } } }');
      expect(unknown.body.errors[0].message).toBe('Cannot query field "kees" on type "Query".');
    } finally {
      await prod.close();
      await off.close();
    }
  });

  it('answers POST bodies other than application/json and application/graphql with 415 in GraphQL\'s shape, running nothing', async () => {
    const name = `csrf-${Date.now()}`;
    const mutation = `mutation { createProject(input: { name: "${name}" }) { id } }`;
    const post = (contentType: string, payload: string) =>
      t.app.inject({ method: 'POST', url: '/graphql', headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': contentType }, payload });
    const boundary = '----svc';
    const multipart = `--${boundary}\r\nContent-Disposition: form-data; name="query"\r\n\r\n${mutation}\r\n--${boundary}--\r\n`;
    for (const [contentType, payload] of [
      ['application/x-www-form-urlencoded', new URLSearchParams({ query: mutation }).toString()],
      ['application/x-www-form-urlencoded; charset=utf-8', new URLSearchParams({ query: mutation }).toString()],
      [`multipart/form-data; boundary=${boundary}`, multipart],
      ['text/plain', JSON.stringify({ query: mutation })],
      ['application/graphql+json', JSON.stringify({ query: mutation })],
    ] as const) {
      const res = await post(contentType, payload);
      expect({ contentType, status: res.statusCode }).toEqual({ contentType, status: 415 });
      const body = JSON.parse(res.body);
      expect(body.data).toBeUndefined();
      expect(body.errors[0].extensions).toMatchObject({ code: 'invalid_request', http_status: 415, request_id: res.headers['x-svc-request-id'] });
    }
    // A mutation over GET is refused too (405).
    const get = await t.app.inject({ method: 'GET', url: '/graphql', query: { query: mutation }, headers: { authorization: `Bearer ${MASTER_KEY}`, accept: 'application/json' } });
    expect(get.statusCode).toBe(405);
    const named = await t.app.inject({
      method: 'GET',
      url: '/graphql',
      query: { query: `query Q { viewer { keyId } } ${mutation.replace('mutation', 'mutation M')}`, operationName: 'M' },
      headers: { authorization: `Bearer ${MASTER_KEY}`, accept: 'application/json' },
    });
    expect(named.statusCode).toBe(405);
    const projects = await operator.get('/v1/projects', { query: { limit: 100 } });
    expect(projects.body.data.filter((p: { name: string }) => p.name === name)).toEqual([]);

    // JSON with a charset parameter and application/graphql still run.
    const json = await post('application/json; charset=utf-8', JSON.stringify({ query: '{ viewer { keyId } }' }));
    expect(JSON.parse(json.body)).toEqual({ data: { viewer: { keyId: 'key_master' } } });
  });
});
