import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MASTER_KEY, buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from './gql.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const KEY_FIELDS = 'id prefix secret name scopes projectId status budgetUsd expiresAt createdAt lastUsedAt revokedAt';

const CREATE_KEY = `mutation($input: CreateKeyInput!) { createKey(input: $input) { secret key { ${KEY_FIELDS} project { id } } } }`;
const ROTATE_KEY = `mutation($id: ID!, $h: Int) { rotateKey(id: $id, overlapHours: $h) { secret previousSecretExpiresAt key { ${KEY_FIELDS} } } }`;
const REVOKE_KEY = `mutation($id: ID!) { revokeKey(id: $id) { ${KEY_FIELDS} } }`;
const KEYS = `query($first: Int, $after: String, $last: Int, $before: String, $projectId: ID) {
  keys(first: $first, after: $after, last: $last, before: $before, projectId: $projectId) {
    edges { cursor node { id name secret } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}`;

describe('viewer', () => {
  it('describes a project key: id, project and scopes', async () => {
    const { projectId, keyId, secret } = await seedProject(operator, { scopes: ['usage:read'] });
    const res = await gql('{ viewer { kind keyId projectId scopes project { id status } } }', {}, { key: secret });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: { viewer: { kind: 'key', keyId, projectId, scopes: ['usage:read'], project: { id: projectId, status: 'active' } } },
    });
  });

  it('describes the operator, who holds every scope and no project', async () => {
    const res = await gql('{ viewer { kind keyId projectId scopes project { id } } }');
    expect(res.body.data.viewer).toMatchObject({ kind: 'operator', keyId: 'key_master', projectId: null, project: null });
    expect(res.body.data.viewer.scopes).toContain('keys:manage');
    expect(res.body.data.viewer.scopes).toContain('risk:approve');
  });
});

describe('keys', () => {
  it('creates a key and shows its full secret in the payload only', async () => {
    const { projectId, secret: admin } = await seedProject(operator);
    const expiresAt = Math.floor(t.clock.now() / 1000) + 3600;
    const res = await gql(CREATE_KEY, { input: { projectId, name: 'ci', scopes: ['keys:manage'], budgetUsd: 12.5, expiresAt } }, { key: admin });
    expect(res.status).toBe(200);
    const { secret, key } = res.body.data.createKey;
    expect(secret).toMatch(/^svc_sk_[0-9A-Za-z]{48}$/);
    expect(key).toMatchObject({
      prefix: 'svc_sk_',
      secret: `svc_sk_...${secret.slice(-4)}`,
      name: 'ci',
      scopes: ['keys:manage'],
      projectId,
      project: { id: projectId },
      status: 'active',
      budgetUsd: 12.5,
      expiresAt,
      createdAt: Math.floor(t.clock.now() / 1000),
      lastUsedAt: null,
      revokedAt: null,
    });
    expect(key.id).toMatch(/^key_/);

    // The new secret authenticates, and reading the key again shows it redacted.
    const again = await gql(`query($id: ID!) { key(id: $id) { secret } }`, { id: key.id }, { key: secret });
    expect(again.body.data.key.secret).toBe(`svc_sk_...${secret.slice(-4)}`);
    expect(again.raw).not.toContain(secret);
  });

  it('takes the project from X-Svc-Project when the input has none', async () => {
    const { projectId } = await seedProject(operator);
    const res = await gql(CREATE_KEY, { input: { name: 'by-header', scopes: ['usage:read'] } }, { headers: { 'x-svc-project': projectId } });
    expect(res.body.data.createKey.key.projectId).toBe(projectId);
    expect(res.headers['x-svc-project']).toBe(projectId);
  });

  it('lists keys newest first with cursors that are the key ids, forward and backward', async () => {
    const { projectId, secret: admin } = await seedProject(operator);
    const ids: string[] = [];
    for (const name of ['k1', 'k2', 'k3', 'k4']) {
      t.clock.advance(1000);
      const res = await gql(CREATE_KEY, { input: { projectId, name, scopes: ['usage:read'] } }, { key: admin });
      ids.push(res.body.data.createKey.key.id);
    }
    const [k1, k2, k3, k4] = ids as [string, string, string, string];
    const first = await gql(KEYS, { first: 2 }, { key: admin });
    expect(first.body.data.keys.edges.map((e: any) => e.node.name)).toEqual(['k4', 'k3']);
    expect(first.body.data.keys.edges.map((e: any) => e.cursor)).toEqual([k4, k3]);
    expect(first.body.data.keys.edges[0].node.secret).toMatch(/^svc_sk_\.\.\.[0-9A-Za-z]{4}$/);
    expect(first.body.data.keys.pageInfo).toEqual({ hasNextPage: true, hasPreviousPage: false, startCursor: k4, endCursor: k3 });

    const next = await gql(KEYS, { first: 2, after: k3 }, { key: admin });
    expect(next.body.data.keys.edges.map((e: any) => e.node.id)).toEqual([k2, k1]);
    expect(next.body.data.keys.pageInfo.hasPreviousPage).toBe(true);

    const back = await gql(KEYS, { last: 2, before: k1 }, { key: admin });
    expect(back.body.data.keys.edges.map((e: any) => e.node.id)).toEqual([k3, k2]);
    expect(back.body.data.keys.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });

    // The same page as REST's list.
    const rest = await client(t.app, admin).get('/v1/keys', { query: { limit: 2, starting_after: k3 } });
    expect(rest.body.data.map((k: any) => k.id)).toEqual([k2, k1]);
  });

  it('audits key.list, as REST does', async () => {
    const { projectId, secret } = await seedProject(operator);
    await gql(KEYS, { first: 3 }, { key: secret });
    const audit = await operator.get('/v1/audit/events', { query: { project_id: projectId, action: 'key.list' } });
    expect(audit.body.data).toHaveLength(1);
    expect(audit.body.data[0].data).toMatchObject({ count: 1, limit: 3 });
  });

  it('rotates with an overlap: both secrets work until previousSecretExpiresAt', async () => {
    const { keyId, secret: old } = await seedProject(operator);
    const res = await gql(ROTATE_KEY, { id: keyId, h: 24 }, { key: old });
    const rotated = res.body.data.rotateKey;
    expect(rotated.secret).not.toBe(old);
    expect(rotated.key.id).toBe(keyId);
    expect(rotated.key.secret).toBe(`svc_sk_...${rotated.secret.slice(-4)}`);
    expect(rotated.previousSecretExpiresAt).toBe(Math.floor(t.clock.now() / 1000) + 24 * 3600);
    expect((await gql('{ viewer { keyId } }', {}, { key: old })).status).toBe(200);
    expect((await gql('{ viewer { keyId } }', {}, { key: rotated.secret })).body.data.viewer.keyId).toBe(keyId);
  });

  it('revokes, idempotently; the revoked key then gets 401', async () => {
    const { projectId } = await seedProject(operator);
    const created = await gql(CREATE_KEY, { input: { projectId, name: 'doomed', scopes: ['keys:manage'] } });
    const { key, secret } = created.body.data.createKey;
    const first = await gql(REVOKE_KEY, { id: key.id });
    expect(first.body.data.revokeKey).toMatchObject({ id: key.id, status: 'revoked', revokedAt: Math.floor(t.clock.now() / 1000) });
    t.clock.advance(5000);
    const second = await gql(REVOKE_KEY, { id: key.id });
    expect(second.body.data.revokeKey).toEqual(first.body.data.revokeKey);
    const denied = await gql('{ viewer { keyId } }', {}, { key: secret });
    expect(denied.status).toBe(401);
    expect(denied.body.error.code).toBe('invalid_api_key');
  });

  it('shows expired keys as expired', async () => {
    const { projectId } = await seedProject(operator);
    const expiresAt = Math.floor(t.clock.now() / 1000) + 60;
    const created = await gql(CREATE_KEY, { input: { projectId, name: 'short', scopes: ['usage:read'], expiresAt } });
    t.clock.advance(61_000);
    const res = await gql(`query($id: ID!) { key(id: $id) { status expiresAt } }`, { id: created.body.data.createKey.key.id });
    expect(res.body.data.key).toEqual({ status: 'expired', expiresAt });
  });
});

describe('projects', () => {
  it('creates, reads, lists and archives a project (operator)', async () => {
    const created = await gql(`mutation { createProject(input: { name: "Acme", plan: "growth", region: "eu-west-1" }) { id name plan region status createdAt } }`);
    const project = created.body.data.createProject;
    expect(project).toMatchObject({ name: 'Acme', plan: 'growth', region: 'eu-west-1', status: 'active', createdAt: Math.floor(t.clock.now() / 1000) });
    expect(created.headers['x-svc-project']).toBe(project.id);

    const read = await gql(`query($id: ID!) { project(id: $id) { id name } }`, { id: project.id });
    expect(read.body.data.project).toEqual({ id: project.id, name: 'Acme' });
    const list = await gql(`{ projects(first: 100) { edges { node { id } } } }`);
    expect(list.body.data.projects.edges.map((e: any) => e.node.id)).toContain(project.id);

    const archived = await gql(`mutation($id: ID!) { archiveProject(id: $id) { id status } }`, { id: project.id });
    expect(archived.body.data.archiveProject).toEqual({ id: project.id, status: 'archived' });
    const again = await gql(`mutation($id: ID!) { archiveProject(id: $id) { id status } }`, { id: project.id });
    expect(again.body.data.archiveProject.status).toBe('archived');
    const audits = await operator.get('/v1/audit/events', { query: { project_id: project.id } });
    expect(audits.body.data.map((a: any) => a.action)).toEqual(['project.archive', 'project.create']);
  });

  it('shows a project key its own project only', async () => {
    const mine = await seedProject(operator);
    await seedProject(operator);
    const res = await gql(`{ projects { edges { node { id } } } }`, {}, { key: mine.secret });
    expect(res.body.data.projects.edges.map((e: any) => e.node.id)).toEqual([mine.projectId]);
  });
});

describe('audit events', () => {
  it('lists audit events newest first, filtered by action, up to 500 a page', async () => {
    const { projectId, keyId, secret } = await seedProject(operator);
    await gql(REVOKE_KEY, { id: keyId });
    const res = await gql(
      `query($p: ID) { auditEvents(projectId: $p, first: 500) { edges { node { id action projectId actorKeyId targetId requestId ip data createdAt } } } }`,
      { p: projectId },
    );
    const actions = res.body.data.auditEvents.edges.map((e: any) => e.node.action);
    expect(actions).toEqual(['key.revoke', 'key.create', 'project.create']);
    const revoke = res.body.data.auditEvents.edges[0].node;
    expect(revoke).toMatchObject({ projectId, actorKeyId: 'key_master', targetId: keyId, data: {} });
    expect(revoke.requestId).toMatch(/^req_/);
    const filtered = await gql(`query($p: ID) { auditEvents(projectId: $p, action: "key.create") { edges { node { action } } } }`, { p: projectId });
    expect(filtered.body.data.auditEvents.edges).toEqual([{ node: { action: 'key.create' } }]);
    expect(secret).toBeTruthy();
  });
});

describe('errors', () => {
  it('answers invalid_request with the param for bad input, as REST', async () => {
    const { projectId } = await seedProject(operator);
    const cases: [Record<string, unknown>, string][] = [
      [{ projectId, name: 'x', scopes: ['root:all'] }, 'scopes'],
      [{ projectId, name: 'x', scopes: [] }, 'scopes'],
      [{ projectId, name: '', scopes: ['usage:read'] }, 'name'],
      [{ projectId, name: 'x', scopes: ['usage:read'], budgetUsd: -1 }, 'budget_usd'],
      [{ projectId, name: 'x', scopes: ['usage:read'], expiresAt: 1 }, 'expires_at'],
    ];
    for (const [input, param] of cases) {
      const res = await gql(CREATE_KEY, { input });
      expect(res.status).toBe(200);
      expectGqlError(res, 'invalid_request', { param, httpStatus: 400, path: ['createKey'] });
      expect(res.body.data).toEqual({ createKey: null });
      const rest = await operator.post('/v1/keys', {
        project_id: input.projectId,
        name: input.name,
        scopes: input.scopes,
        ...(input.budgetUsd !== undefined ? { budget_usd: input.budgetUsd } : {}),
        ...(input.expiresAt !== undefined ? { expires_at: input.expiresAt } : {}),
      });
      expect({ param, rest: rest.body.error.param, code: rest.body.error.code }).toEqual({ param, rest: param, code: 'invalid_request' });
    }
    const overlap = await gql(ROTATE_KEY, { id: (await seedProject(operator)).keyId, h: 169 });
    expectGqlError(overlap, 'invalid_request', { param: 'overlap_hours' });
  });

  it('answers missing_project_id when neither input nor header names a project', async () => {
    const res = await gql(CREATE_KEY, { input: { name: 'x', scopes: ['usage:read'] } });
    expectGqlError(res, 'missing_project_id', { param: 'project_id', httpStatus: 400 });
  });

  it('answers key_name_conflict for a name in use', async () => {
    const { projectId } = await seedProject(operator);
    await gql(CREATE_KEY, { input: { projectId, name: 'dup', scopes: ['usage:read'] } });
    const res = await gql(CREATE_KEY, { input: { projectId, name: 'dup', scopes: ['usage:read'] } });
    expectGqlError(res, 'key_name_conflict', { param: 'name', httpStatus: 409 });
  });

  it('answers not_found for unknown ids', async () => {
    for (const [query, field] of [
      [`{ key(id: "key_nope") { id } }`, 'key'],
      [`mutation { revokeKey(id: "key_nope") { id } }`, 'revokeKey'],
      [`mutation { rotateKey(id: "key_nope") { secret } }`, 'rotateKey'],
      [`{ project(id: "prj_nope") { id } }`, 'project'],
      [`mutation { archiveProject(id: "prj_nope") { id } }`, 'archiveProject'],
    ] as const) {
      const res = await gql(query);
      expectGqlError(res, 'not_found', { httpStatus: 404, path: [field] });
    }
  });

  it('maps page arguments onto the list limits, naming the GraphQL argument', async () => {
    const { secret } = await seedProject(operator);
    const cases: [Record<string, unknown>, string][] = [
      [{ first: 0 }, 'first'],
      [{ first: 101 }, 'first'],
      [{ last: 101, before: 'key_x' }, 'last'],
      [{ first: 1, last: 1 }, 'last'],
      [{ after: 'key_a', before: 'key_b' }, 'before'],
      [{ last: 2 }, 'before'],
      [{ first: 2, after: 'key_unknown' }, 'after'],
    ];
    for (const [variables, param] of cases) {
      const res = await gql(KEYS, variables, { key: secret });
      expect({ variables, param: res.body.errors?.[0]?.extensions?.param }).toEqual({ variables, param });
      expectGqlError(res, 'invalid_request', { param, httpStatus: 400, path: ['keys'] });
    }
    // Audit events allow 500 a page, and no more.
    const big = await gql(`{ auditEvents(first: 500) { edges { cursor } } }`);
    expect(big.body.errors).toBeUndefined();
    expectGqlError(await gql(`{ auditEvents(first: 501) { edges { cursor } } }`), 'invalid_request', { param: 'first' });
  });

  it('answers 401 invalid_api_key in the REST error shape before GraphQL runs', async () => {
    for (const key of [null, 'svc_sk_not_a_real_key_000000000000000000000000', 'Basic abc']) {
      const res = await gql('{ viewer { keyId } }', {}, { key: key === 'Basic abc' ? null : key, headers: key === 'Basic abc' ? { authorization: key } : {} });
      expect(res.status).toBe(401);
      expect(Object.keys(res.body)).toEqual(['error']);
      expect(res.body.error).toMatchObject({ type: 'svc.error', code: 'invalid_api_key', param: null });
      expect(res.body.error.request_id).toBe(res.headers['x-svc-request-id']);
    }
  });
});

describe('security', () => {
  it('requires keys:manage for key fields and audit:read for audit events', async () => {
    const { projectId, keyId } = await seedProject(operator);
    const weak = (await gql(CREATE_KEY, { input: { projectId, name: 'weak', scopes: ['inference:write'] } })).body.data.createKey.secret;
    await expectGqlScopeRequired(gql, weak, [
      { field: 'keys', query: '{ keys { edges { cursor } } }' },
      { field: 'key', query: `{ key(id: "${keyId}") { id } }` },
      { field: 'createKey', query: CREATE_KEY, variables: { input: { projectId, name: 'x', scopes: ['inference:write'] } } },
      { field: 'rotateKey', query: ROTATE_KEY, variables: { id: keyId } },
      { field: 'revokeKey', query: REVOKE_KEY, variables: { id: keyId } },
      { field: 'auditEvents', query: '{ auditEvents { edges { cursor } } }' },
    ]);
    // Nothing happened: the key is still active and no key.list was audited for the weak key.
    const key = await operator.get(`/v1/keys/${keyId}`);
    expect(key.body.status).toBe('active');
  });

  it('names the missing scope, keeps the fields that are allowed, and denies createProject to a key', async () => {
    const { secret } = await seedProject(operator, { scopes: ['keys:manage'] });
    const res = await gql('{ viewer { keyId } auditEvents { edges { cursor } } }', {}, { key: secret });
    expect(res.status).toBe(200);
    expect(res.body.data.viewer.keyId).toMatch(/^key_/);
    const err = expectGqlError(res, 'insufficient_scope', { httpStatus: 403, path: ['auditEvents'] });
    expect(err.message).toContain('audit:read');

    const project = await gql('mutation { createProject(input: { name: "mine" }) { id } }', {}, { key: secret });
    expectGqlError(project, 'insufficient_scope', { httpStatus: 403, path: ['createProject'] });
    const own = (await gql('{ viewer { projectId } }', {}, { key: secret })).body.data.viewer.projectId;
    const archive = await gql(`mutation { archiveProject(id: "${own}") { status } }`, {}, { key: secret });
    expectGqlError(archive, 'insufficient_scope', { httpStatus: 403, path: ['archiveProject'] });
    expect((await gql(`{ project(id: "${own}") { status } }`, {}, { key: secret })).body.data.project.status).toBe('active');
  });

  it('lets a key grant only scopes it holds', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ['keys:manage'] });
    const res = await gql(CREATE_KEY, { input: { projectId, name: 'wider', scopes: ['keys:manage', 'audit:read'] } }, { key: secret });
    expectGqlError(res, 'insufficient_scope', { param: 'scopes', httpStatus: 403 });
  });

  it("answers not_found for another project's ids", async () => {
    const mine = await seedProject(operator);
    const theirs = await seedProject(operator);
    await expectGqlHiddenFrom(gql, mine.secret, [
      { field: 'key', query: `{ key(id: "${theirs.keyId}") { id } }` },
      { field: 'rotateKey', query: ROTATE_KEY, variables: { id: theirs.keyId } },
      { field: 'revokeKey', query: REVOKE_KEY, variables: { id: theirs.keyId } },
      { field: 'keys', query: KEYS, variables: { projectId: theirs.projectId } },
      { field: 'createKey', query: CREATE_KEY, variables: { input: { projectId: theirs.projectId, name: 'x', scopes: ['keys:manage'] } } },
      { field: 'project', query: `{ project(id: "${theirs.projectId}") { id } }` },
      { field: 'auditEvents', query: `{ auditEvents(projectId: "${theirs.projectId}") { edges { cursor } } }` },
    ]);
    const headerProbe = await gql(KEYS, {}, { key: mine.secret, headers: { 'x-svc-project': theirs.projectId } });
    expectGqlError(headerProbe, 'not_found', { httpStatus: 404 });
    const theirKey = await operator.get(`/v1/keys/${theirs.keyId}`);
    expect(theirKey.body.status).toBe('active');
  });

  it('never shows a full secret outside the create and rotate payloads, nor logs one', async () => {
    const { projectId } = await seedProject(operator);
    const created = await gql(CREATE_KEY, { input: { projectId, name: 'secretive', scopes: ['keys:manage'] } });
    const { secret, key } = created.body.data.createKey;
    const reads = [
      await gql(KEYS, { projectId }),
      await gql(`query($id: ID!) { key(id: $id) { secret } }`, { id: key.id }),
      await gql(REVOKE_KEY, { id: key.id }),
    ];
    for (const r of reads) expect(r.raw).not.toContain(secret);
    expect(t.logs.text).not.toContain(secret);
    expect(t.logs.text).not.toContain(MASTER_KEY);
  });
});
