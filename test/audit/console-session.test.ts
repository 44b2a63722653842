import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_ACTION_NAMES, AUDIT_ACTIONS } from '../../src/domain/audit/actions.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';

// key.list from the admin console (X-Svc-Console-Session) is audited once per (actor, project, session, page);
// every other call as the spec asks. And the one table of audit actions, as GraphQL serves it to the console.

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const SESSION = 'c0nsole-Session_0123456789';
const OTHER_SESSION = 'another-console-session-01';
const KEYS = `query($after: String) { keys(first: 2, after: $after) { edges { node { id } } pageInfo { endCursor } } }`;

async function keyLists(actorKeyId: string) {
  return t.deps.db.auditEvent.findMany({ where: { action: 'key.list', actorKeyId }, orderBy: { id: 'asc' } });
}

describe('key.list audit and the console session header', () => {
  it('records a console listing once per session and page, on GraphQL and REST', async () => {
    const { keyId, secret, projectId } = await seedProject(operator, { scopes: ['keys:manage'] });
    for (let i = 0; i < 3; i++) await operator.post('/v1/keys', { project_id: projectId, name: `extra-${i}`, scopes: ['keys:manage'] });
    const headers = { 'x-svc-console-session': SESSION };

    const first = await gql(KEYS, {}, { key: secret, headers });
    expect(first.body.errors).toBeUndefined();
    await gql(KEYS, {}, { key: secret, headers });
    expect((await client(t.app, secret).get('/v1/keys?limit=2', { headers })).status).toBe(200);
    expect(await keyLists(keyId)).toHaveLength(1);

    // The next page is another page; seen twice, it is recorded once.
    const after = first.body.data.keys.pageInfo.endCursor as string;
    await gql(KEYS, { after }, { key: secret, headers });
    await gql(KEYS, { after }, { key: secret, headers });
    // Another session of the same key is recorded again.
    await gql(KEYS, {}, { key: secret, headers: { 'x-svc-console-session': OTHER_SESSION } });

    const events = await keyLists(keyId);
    expect(events.map((e) => [e.projectId, (e.data as Record<string, unknown>).console_session, (e.data as Record<string, unknown>).console_page])).toEqual([
      [projectId, SESSION, 'first'],
      [projectId, SESSION, `after:${after}`],
      [projectId, OTHER_SESSION, 'first'],
    ]);
    expect(events[0]!.data).toMatchObject({ count: 2, limit: 2 });
  });

  it('records every call without the header, or with a malformed one, exactly as before', async () => {
    const { keyId, secret } = await seedProject(operator, { scopes: ['keys:manage'] });
    const api = client(t.app, secret);
    await api.get('/v1/keys');
    await api.get('/v1/keys');
    await gql(KEYS, {}, { key: secret });
    await api.get('/v1/keys', { headers: { 'x-svc-console-session': 'short' } });
    await api.get('/v1/keys', { headers: { 'x-svc-console-session': 'short' } });
    await api.get('/v1/keys', { headers: { 'x-svc-console-session': 'x'.repeat(65) } });
    const events = await keyLists(keyId);
    expect(events).toHaveLength(6);
    for (const e of events) expect(e.data).not.toHaveProperty('console_session');
  });

  it('keeps actors apart: one key\'s session does not hide another key\'s listing', async () => {
    const a = await seedProject(operator, { scopes: ['keys:manage'] });
    const b = await client(t.app, a.secret).post('/v1/keys', { project_id: a.projectId, name: 'second-actor', scopes: ['keys:manage'] });
    const headers = { 'x-svc-console-session': SESSION };
    await client(t.app, a.secret).get('/v1/keys', { headers });
    await client(t.app, b.body.secret).get('/v1/keys', { headers });
    expect(await keyLists(a.keyId)).toHaveLength(1);
    expect(await keyLists(b.body.id)).toHaveLength(1);
    // The operator, listing the project, is a third actor.
    await operator.get(`/v1/keys?project_id=${a.projectId}`, { headers });
    await operator.get(`/v1/keys?project_id=${a.projectId}`, { headers });
    const mine = await t.deps.db.auditEvent.findMany({
      where: { action: 'key.list', actorKeyId: 'key_master', projectId: a.projectId },
    });
    expect(mine).toHaveLength(1);
  });

  it('writes one event when the same console page is listed many times at once', async () => {
    const { keyId, secret } = await seedProject(operator, { scopes: ['keys:manage'] });
    const headers = { 'x-svc-console-session': 'concurrent-session-00001' };
    const answers = await Promise.all(Array.from({ length: 8 }, () => client(t.app, secret).get('/v1/keys', { headers })));
    expect(answers.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(await keyLists(keyId)).toHaveLength(1);
  });
});

describe('auditActions', () => {
  it('lists every action of the one table, the spec\'s among them', async () => {
    const { secret } = await seedProject(operator, { scopes: ['audit:read'] });
    const res = await gql(`{ auditActions }`, {}, { key: secret });
    expect(res.body).toEqual({ data: { auditActions: AUDIT_ACTION_NAMES } });
    // Spec §5 and §6.3 name these; the rest are the gateway's own (README).
    expect(AUDIT_ACTION_NAMES).toEqual(expect.arrayContaining(['key.create', 'key.rotate', 'key.revoke', 'key.list', 'webhook.delivery.failed']));
    for (const description of Object.values(AUDIT_ACTIONS)) expect(description).toMatch(/^[A-Z].+\.$/);
  });

  it('lists exactly the actions the audit log holds after each kind of change', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ['keys:manage', 'governance:manage', 'audit:read'] });
    const api = client(t.app, secret);
    const key = await api.post('/v1/keys', { project_id: projectId, name: 'audited', scopes: ['keys:manage'] });
    await api.post(`/v1/keys/${key.body.id}/rotate`, {});
    await api.post(`/v1/keys/${key.body.id}/revoke`);
    await api.get('/v1/keys');
    await api.put(`/v1/projects/${projectId}/rate-limits`, { requests_per_minute: 10, tokens_per_minute: 10, burst: 0 });
    const written = await t.deps.db.auditEvent.findMany({ select: { action: true }, distinct: ['action'] });
    for (const { action } of written) expect(AUDIT_ACTION_NAMES).toContain(action);
  });

  it('needs audit:read', async () => {
    const { secret } = await seedProject(operator, { scopes: ['keys:manage'] });
    await expectGqlScopeRequired(gql, secret, [{ field: 'auditActions', query: `{ auditActions }` }]);
  });
});
