/**
 * Issue 14, keys: a child key is no looser than its creator (budget, expiry), revoke needs the target's scopes, and
 * key names are normalized, free of invisible characters and lookalike script mixes, and unique ignoring case.
 * Each rule is one domain function serving REST and GraphQL; both surfaces are checked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectGqlError, gqlClient, type Gql } from '../graphql/gql.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const CREATE_KEY = `mutation($input: CreateKeyInput!) { createKey(input: $input) { secret key { id name budgetUsd expiresAt } } }`;
const ROTATE_KEY = `mutation($id: ID!) { rotateKey(id: $id) { secret key { id } } }`;
const REVOKE_KEY = `mutation($id: ID!) { revokeKey(id: $id) { id status } }`;

const nowUnix = () => Math.floor(t.clock.now() / 1000);
const row = (id: string) => t.deps.db.apiKey.findUniqueOrThrow({ where: { id } });
const auditCount = (action: string) => t.deps.db.auditEvent.count({ where: { action } });

/** A project and, made by the operator, a key of it with keys:manage and the given limits. */
async function limitedCreator(limits: { budget_usd?: number; expires_at?: number }, scopes = ['keys:manage', 'usage:read']) {
  const { projectId } = await seedProject(operator);
  const res = await operator.post('/v1/keys', { project_id: projectId, name: 'creator', scopes, ...limits });
  expect(res.status, res.raw).toBe(200);
  return { projectId, id: res.body.id as string, secret: res.body.secret as string, api: client(t.app, res.body.secret) };
}

describe("a child key is no looser than its creator's budget and expiry", () => {
  it('REST: a key with a budget_usd cannot create a key without one or with a higher one (403, param budget_usd), and stores nothing', async () => {
    const c = await limitedCreator({ budget_usd: 5 });
    const keys = await t.deps.db.apiKey.count();
    const audits = await auditCount('key.create');
    expectError(await c.api.post('/v1/keys', { project_id: c.projectId, name: 'none', scopes: ['usage:read'] }), 403, 'insufficient_scope', 'budget_usd');
    expectError(await c.api.post('/v1/keys', { project_id: c.projectId, name: 'null', scopes: ['usage:read'], budget_usd: null }), 403, 'insufficient_scope', 'budget_usd');
    expectError(await c.api.post('/v1/keys', { project_id: c.projectId, name: 'more', scopes: ['usage:read'], budget_usd: 5.000001 }), 403, 'insufficient_scope', 'budget_usd');
    expect(await t.deps.db.apiKey.count()).toBe(keys);
    expect(await auditCount('key.create')).toBe(audits);

    const same = await c.api.post('/v1/keys', { project_id: c.projectId, name: 'same', scopes: ['usage:read'], budget_usd: 5 });
    expect(same.status).toBe(200);
    expect(same.body.budget_usd).toBe(5);
    const less = await c.api.post('/v1/keys', { project_id: c.projectId, name: 'less', scopes: ['usage:read'], budget_usd: 0.5 });
    expect(less.body.budget_usd).toBe(0.5);
    expect((await row(less.body.id)).budgetMicros).toBe(500_000n);
    // No expiry on the creator: none is asked of the child.
    expect(same.body.expires_at).toBeNull();
  });

  it('REST: a key with an expires_at cannot create a key without one or expiring later (403, param expires_at)', async () => {
    const expiresAt = nowUnix() + 3600;
    const c = await limitedCreator({ expires_at: expiresAt });
    const keys = await t.deps.db.apiKey.count();
    expectError(await c.api.post('/v1/keys', { project_id: c.projectId, name: 'forever', scopes: ['usage:read'] }), 403, 'insufficient_scope', 'expires_at');
    expectError(await c.api.post('/v1/keys', { project_id: c.projectId, name: 'later', scopes: ['usage:read'], expires_at: expiresAt + 1 }), 403, 'insufficient_scope', 'expires_at');
    expect(await t.deps.db.apiKey.count()).toBe(keys);

    const same = await c.api.post('/v1/keys', { project_id: c.projectId, name: 'same', scopes: ['usage:read'], expires_at: expiresAt });
    expect(same.status).toBe(200);
    expect(same.body.expires_at).toBe(expiresAt);
    const sooner = await c.api.post('/v1/keys', { project_id: c.projectId, name: 'sooner', scopes: ['usage:read'], expires_at: expiresAt - 60 });
    expect((await row(sooner.body.id)).expiresAt?.getTime()).toBe((expiresAt - 60) * 1000);
    expect(sooner.body.budget_usd).toBeNull();
  });

  it('REST: with both limits, each is checked', async () => {
    const expiresAt = nowUnix() + 3600;
    const c = await limitedCreator({ budget_usd: 2, expires_at: expiresAt });
    expectError(await c.api.post('/v1/keys', { project_id: c.projectId, name: 'no-expiry', scopes: ['usage:read'], budget_usd: 1 }), 403, 'insufficient_scope', 'expires_at');
    expectError(await c.api.post('/v1/keys', { project_id: c.projectId, name: 'no-budget', scopes: ['usage:read'], expires_at: expiresAt }), 403, 'insufficient_scope', 'budget_usd');
    const ok = await c.api.post('/v1/keys', { project_id: c.projectId, name: 'ok', scopes: ['usage:read'], budget_usd: 1, expires_at: expiresAt });
    expect(ok.body).toMatchObject({ budget_usd: 1, expires_at: expiresAt, status: 'active' });
  });

  it('does not restrict the operator, nor a key without limits', async () => {
    const { projectId, secret } = await seedProject(operator);
    expect((await operator.post('/v1/keys', { project_id: projectId, name: 'op', scopes: ['usage:read'] })).status).toBe(200);
    expect((await client(t.app, secret).post('/v1/keys', { project_id: projectId, name: 'free', scopes: ['usage:read'] })).status).toBe(200);
  });

  it('REST: a limited key cannot rotate a looser key (its new secret would escape the limit), 403 param key_id, and the secret is unchanged', async () => {
    const c = await limitedCreator({ budget_usd: 5 });
    const loose = await operator.post('/v1/keys', { project_id: c.projectId, name: 'loose', scopes: ['usage:read'] });
    const before = await row(loose.body.id);
    expectError(await c.api.post(`/v1/keys/${loose.body.id}/rotate`, { overlap_hours: 0 }), 403, 'insufficient_scope', 'key_id');
    expect((await row(loose.body.id)).secretHash).toBe(before.secretHash);
    expect((await client(t.app, loose.body.secret).get('/v1/keys')).status).toBe(403); // still authenticates (usage:read only)

    const tight = await c.api.post('/v1/keys', { project_id: c.projectId, name: 'tight', scopes: ['usage:read'], budget_usd: 1 });
    expect((await c.api.post(`/v1/keys/${tight.body.id}/rotate`, {})).status).toBe(200);
    // It rotates itself.
    const self = await c.api.post(`/v1/keys/${c.id}/rotate`, { overlap_hours: 1 });
    expect(self.status).toBe(200);

    const e = await limitedCreator({ expires_at: nowUnix() + 600 });
    const lasting = await operator.post('/v1/keys', { project_id: e.projectId, name: 'lasting', scopes: ['usage:read'], expires_at: nowUnix() + 601 });
    expectError(await e.api.post(`/v1/keys/${lasting.body.id}/rotate`), 403, 'insufficient_scope', 'key_id');
  });

  it('GraphQL: createKey and rotateKey follow the same rule', async () => {
    const expiresAt = nowUnix() + 3600;
    const c = await limitedCreator({ budget_usd: 5, expires_at: expiresAt });
    const keys = await t.deps.db.apiKey.count();
    const noBudget = await gql(CREATE_KEY, { input: { projectId: c.projectId, name: 'g1', scopes: ['usage:read'], expiresAt } }, { key: c.secret });
    expectGqlError(noBudget, 'insufficient_scope', { param: 'budget_usd', httpStatus: 403, path: ['createKey'] });
    expect(noBudget.body.data).toEqual({ createKey: null });
    const higher = await gql(CREATE_KEY, { input: { projectId: c.projectId, name: 'g2', scopes: ['usage:read'], budgetUsd: 6, expiresAt } }, { key: c.secret });
    expectGqlError(higher, 'insufficient_scope', { param: 'budget_usd', httpStatus: 403 });
    const noExpiry = await gql(CREATE_KEY, { input: { projectId: c.projectId, name: 'g3', scopes: ['usage:read'], budgetUsd: 5 } }, { key: c.secret });
    expectGqlError(noExpiry, 'insufficient_scope', { param: 'expires_at', httpStatus: 403 });
    const later = await gql(CREATE_KEY, { input: { projectId: c.projectId, name: 'g4', scopes: ['usage:read'], budgetUsd: 5, expiresAt: expiresAt + 1 } }, { key: c.secret });
    expectGqlError(later, 'insufficient_scope', { param: 'expires_at', httpStatus: 403 });
    expect(await t.deps.db.apiKey.count()).toBe(keys);

    const ok = await gql(CREATE_KEY, { input: { projectId: c.projectId, name: 'g5', scopes: ['usage:read'], budgetUsd: 4, expiresAt } }, { key: c.secret });
    expect(ok.body.data.createKey.key).toMatchObject({ name: 'g5', budgetUsd: 4, expiresAt });

    const loose = await operator.post('/v1/keys', { project_id: c.projectId, name: 'loose', scopes: ['usage:read'] });
    const before = await row(loose.body.id);
    const rotated = await gql(ROTATE_KEY, { id: loose.body.id }, { key: c.secret });
    expectGqlError(rotated, 'insufficient_scope', { param: 'key_id', httpStatus: 403, path: ['rotateKey'] });
    expect(rotated.body.data).toEqual({ rotateKey: null });
    expect((await row(loose.body.id)).secretHash).toBe(before.secretHash);
  });
});

describe('revoke needs every scope of the key it revokes', () => {
  it('REST: a keys:manage key cannot revoke a key with more scopes (403, param key_id); nothing changes', async () => {
    const { projectId, keyId: adminId, secret: adminSecret } = await seedProject(operator);
    const narrow = await operator.post('/v1/keys', { project_id: projectId, name: 'narrow', scopes: ['keys:manage'] });
    const api = client(t.app, narrow.body.secret);
    const audits = await auditCount('key.revoke');
    expectError(await api.post(`/v1/keys/${adminId}/revoke`), 403, 'insufficient_scope', 'key_id');
    const stored = await row(adminId);
    expect({ status: stored.status, revokedAt: stored.revokedAt }).toEqual({ status: 'active', revokedAt: null });
    expect(await auditCount('key.revoke')).toBe(audits);
    expect((await client(t.app, adminSecret).get('/v1/keys')).status).toBe(200);

    // A key whose scopes it holds, and itself, it may revoke.
    const peer = await operator.post('/v1/keys', { project_id: projectId, name: 'peer', scopes: ['keys:manage'] });
    expect((await api.post(`/v1/keys/${peer.body.id}/revoke`)).body.status).toBe('revoked');
    expect((await api.post(`/v1/keys/${narrow.body.id}/revoke`)).body.status).toBe('revoked');
    // The operator revokes any key.
    expect((await operator.post(`/v1/keys/${adminId}/revoke`)).body.status).toBe('revoked');
  });

  it('REST: the check also holds for a key already revoked', async () => {
    const { projectId, keyId: adminId } = await seedProject(operator);
    const narrow = await operator.post('/v1/keys', { project_id: projectId, name: 'narrow', scopes: ['keys:manage'] });
    await operator.post(`/v1/keys/${adminId}/revoke`);
    expectError(await client(t.app, narrow.body.secret).post(`/v1/keys/${adminId}/revoke`), 403, 'insufficient_scope', 'key_id');
  });

  it('GraphQL: revokeKey answers insufficient_scope with param key_id, and the key stays active', async () => {
    const { projectId, keyId: adminId } = await seedProject(operator);
    const narrow = await operator.post('/v1/keys', { project_id: projectId, name: 'narrow', scopes: ['keys:manage'] });
    const res = await gql(REVOKE_KEY, { id: adminId }, { key: narrow.body.secret });
    expectGqlError(res, 'insufficient_scope', { param: 'key_id', httpStatus: 403, path: ['revokeKey'] });
    expect(res.body.data).toEqual({ revokeKey: null });
    expect((await row(adminId)).status).toBe('active');
    const peer = await operator.post('/v1/keys', { project_id: projectId, name: 'peer', scopes: ['keys:manage'] });
    expect((await gql(REVOKE_KEY, { id: peer.body.id }, { key: narrow.body.secret })).body.data.revokeKey.status).toBe('revoked');
  });
});

describe('key names', () => {
  it('are stored NFC without surrounding white space, and "admin " is "admin"', async () => {
    const { projectId } = await seedProject(operator);
    const spaced = await operator.post('/v1/keys', { project_id: projectId, name: ' \t admin \u00a0\n', scopes: ['usage:read'] });
    expect(spaced.status).toBe(200);
    expect(spaced.body.name).toBe('admin');
    expect((await row(spaced.body.id)).name).toBe('admin');
    expect((await operator.get(`/v1/keys/${spaced.body.id}`)).body.name).toBe('admin');

    const decomposed = await operator.post('/v1/keys', { project_id: projectId, name: 'cafe\u0301', scopes: ['usage:read'] });
    expect(decomposed.body.name).toBe('caf\u00e9');
    expect((await row(decomposed.body.id)).name).toBe('caf\u00e9');
    expectError(await operator.post('/v1/keys', { project_id: projectId, name: 'caf\u00e9', scopes: ['usage:read'] }), 409, 'key_name_conflict', 'name');
  });

  it('count 100 characters after normalization', async () => {
    const { projectId } = await seedProject(operator);
    const padded = await operator.post('/v1/keys', { project_id: projectId, name: `  ${'x'.repeat(100)}  `, scopes: ['usage:read'] });
    expect(padded.status).toBe(200);
    expect(padded.body.name).toBe('x'.repeat(100));
    // 200 code points as sent, 100 once composed.
    const composed = await operator.post('/v1/keys', { project_id: projectId, name: 'e\u0301'.repeat(100), scopes: ['usage:read'] });
    expect(composed.status).toBe(200);
    expect(composed.body.name).toBe('\u00e9'.repeat(100));
    expectError(await operator.post('/v1/keys', { project_id: projectId, name: 'y'.repeat(101), scopes: ['usage:read'] }), 400, 'invalid_request', 'name');
    expectError(await operator.post('/v1/keys', { project_id: projectId, name: ' \u3000 ', scopes: ['usage:read'] }), 400, 'invalid_request', 'name');
  });

  it('are unique ignoring case (and compatibility forms) among the non-revoked keys of the project: 409, nothing stored', async () => {
    const { projectId } = await seedProject(operator);
    const admin = await operator.post('/v1/keys', { project_id: projectId, name: 'admin', scopes: ['usage:read'] });
    expect(admin.status).toBe(200);
    const keys = await t.deps.db.apiKey.count();
    const audits = await auditCount('key.create');
    for (const name of ['ADMIN', 'Admin', 'admin ', ' aDmIn', '\uff41\uff44\uff4d\uff49\uff4e', 'adm\u0131n']) {
      const res = await operator.post('/v1/keys', { project_id: projectId, name, scopes: ['usage:read'] });
      expect({ name, status: res.status }).toEqual({ name, status: 409 });
      expectError(res, 409, 'key_name_conflict', 'name');
    }
    expect(await t.deps.db.apiKey.count()).toBe(keys);
    expect(await auditCount('key.create')).toBe(audits);
    // ß folds to ss.
    expect((await operator.post('/v1/keys', { project_id: projectId, name: 'Stra\u00dfe', scopes: ['usage:read'] })).status).toBe(200);
    expectError(await operator.post('/v1/keys', { project_id: projectId, name: 'STRASSE', scopes: ['usage:read'] }), 409, 'key_name_conflict', 'name');

    // Another project may use it; revoking frees it, in any case.
    const other = await seedProject(operator);
    expect((await operator.post('/v1/keys', { project_id: other.projectId, name: 'ADMIN', scopes: ['usage:read'] })).status).toBe(200);
    await operator.post(`/v1/keys/${admin.body.id}/revoke`);
    const again = await operator.post('/v1/keys', { project_id: projectId, name: 'ADMIN', scopes: ['usage:read'] });
    expect(again.status).toBe(200);
    expect(again.body.name).toBe('ADMIN');
  });

  it('are unique in the database too: two racing creates of "admin" and "ADMIN" make one key', async () => {
    const { projectId } = await seedProject(operator);
    const results = await Promise.all(
      ['race', 'RACE', 'Race'].map((name) => operator.post('/v1/keys', { project_id: projectId, name, scopes: ['usage:read'] })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409]);
    for (const r of results.filter((r) => r.status === 409)) expectError(r, 409, 'key_name_conflict', 'name');
    const stored = await t.deps.db.apiKey.findMany({ where: { projectId, status: 'active', NOT: { name: { startsWith: 'key_' } } } });
    expect(stored.map((k) => k.activeName)).toEqual(['race']);
    // The index itself refuses a second row with the same folded name.
    await expect(
      t.deps.db.apiKey.create({
        data: { ...stored[0]!, id: 'key_direct_insert', secretHash: 'x'.repeat(64), name: 'RACE', scopes: stored[0]!.scopes },
      }),
    ).rejects.toThrow();
  });

  const refused: [string, string][] = [
    ['a Cyrillic а among Latin letters', '\u0430dmin'],
    ['a Cyrillic о among Latin letters', 'r\u043eot'],
    ['a Greek ο among Latin letters', 'r\u03bfot'],
    ['Greek and Cyrillic letters together', '\u03b1\u0431'],
    ['fullwidth Latin with Cyrillic', '\uff41\u0434'],
    ['a zero-width space', 'ad\u200bmin'],
    ['a zero-width non-joiner', 'admin\u200c'],
    ['a zero-width joiner', '\u200dadmin'],
    ['a word joiner', 'ad\u2060min'],
    ['a byte order mark', '\ufeffadmin'],
    ['a right-to-left override', '\u202enimda'],
    ['a left-to-right embedding', '\u202aadmin'],
    ['a pop directional formatting', 'admin\u202c'],
    ['an isolate', '\u2066admin\u2069'],
    ['a left-to-right mark', 'admin\u200e'],
    ['a right-to-left mark', '\u200fadmin'],
    ['an Arabic letter mark', 'admin\u061c'],
    ['a control character', 'ad\u0007min'],
    ['a tab inside', 'ad\tmin'],
    ['a newline inside', 'ad\nmin'],
    ['a soft hyphen', 'ad\u00admin'],
    ['a Hangul filler', '\u3164'],
  ];
  for (const [what, name] of refused) {
    it(`refuse ${what}: 400 invalid_request, param name, nothing stored`, async () => {
      const { projectId } = await seedProject(operator);
      const keys = await t.deps.db.apiKey.count();
      expectError(await operator.post('/v1/keys', { project_id: projectId, name, scopes: ['usage:read'] }), 400, 'invalid_request', 'name');
      expect(await t.deps.db.apiKey.count()).toBe(keys);
    });
  }

  it('accept one script at a time, digits, punctuation and emoji', async () => {
    const { projectId } = await seedProject(operator);
    for (const name of ['\u0430\u0434\u043c\u0438\u043d', '\u03b4\u03bf\u03ba\u03b9\u03bc\u03ae', 'ci-bot 2 (prod)', 'caf\u00e9 \ud83d\udd11', '\u30ad\u30fc admin', '\u2764\ufe0f']) {
      const res = await operator.post('/v1/keys', { project_id: projectId, name, scopes: ['usage:read'] });
      expect({ name, status: res.status }).toEqual({ name, status: 200 });
      expect(res.body.name).toBe(name);
    }
  });

  it('GraphQL: the same normalization, refusals and conflicts', async () => {
    const { projectId } = await seedProject(operator);
    const created = await gql(CREATE_KEY, { input: { projectId, name: '  deploy  ', scopes: ['usage:read'] } });
    expect(created.body.data.createKey.key.name).toBe('deploy');
    expect((await row(created.body.data.createKey.key.id)).name).toBe('deploy');

    const keys = await t.deps.db.apiKey.count();
    const conflict = await gql(CREATE_KEY, { input: { projectId, name: 'DEPLOY', scopes: ['usage:read'] } });
    expectGqlError(conflict, 'key_name_conflict', { param: 'name', httpStatus: 409, path: ['createKey'] });
    for (const name of ['d\u0435ploy', 'de\u200bploy', '\u202edeploy', 'de\u0000ploy']) {
      const res = await gql(CREATE_KEY, { input: { projectId, name, scopes: ['usage:read'] } });
      expectGqlError(res, 'invalid_request', { param: 'name', httpStatus: 400, path: ['createKey'] });
      expect(res.body.data).toEqual({ createKey: null });
    }
    expect(await t.deps.db.apiKey.count()).toBe(keys);
  });
});
