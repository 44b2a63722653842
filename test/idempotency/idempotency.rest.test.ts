import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { SCOPES } from '../../src/domain/keys/scopes.ts';

let t: TestApp;
let operator: Client;
let api: Client;
let projectId: string;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  const seeded = await seedProject(operator);
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
});
afterAll(() => t.close());

const idem = (key: string) => ({ headers: { 'idempotency-key': key } });

describe('Idempotency-Key', () => {
  it('replays the first response for the same key and body, executing nothing again', async () => {
    const body = { project_id: projectId, name: 'idem-1', scopes: ['keys:manage'] };
    const first = await api.post('/v1/keys', body, idem('create-1'));
    expect(first.status).toBe(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const second = await api.post('/v1/keys', body, idem('create-1'));
    expect(second.status).toBe(200);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(second.headers['x-svc-request-id']).not.toBe(first.headers['x-svc-request-id']);
    expect(await t.deps.db.apiKey.count({ where: { projectId, name: 'idem-1' } })).toBe(1);
    expect(await t.deps.db.auditEvent.count({ where: { projectId, action: 'key.create', targetId: first.body.id } })).toBe(1);
  });

  it('treats the same fields in another order as the same body', async () => {
    const first = await api.post('/v1/keys', { project_id: projectId, name: 'idem-order', scopes: ['keys:manage'] }, idem('order'));
    const second = await api.post('/v1/keys', { scopes: ['keys:manage'], name: 'idem-order', project_id: projectId }, idem('order'));
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body.id).toBe(first.body.id);
  });

  it('answers 409 idempotency_conflict for the same key with a different body', async () => {
    await api.post('/v1/keys', { project_id: projectId, name: 'idem-2', scopes: ['keys:manage'] }, idem('create-2'));
    const res = await api.post('/v1/keys', { project_id: projectId, name: 'idem-other', scopes: ['keys:manage'] }, idem('create-2'));
    expectError(res, 409, 'idempotency_conflict', 'Idempotency-Key');
    expect(await t.deps.db.apiKey.count({ where: { projectId, name: 'idem-other' } })).toBe(0);
  });

  it('runs two identical concurrent requests once', async () => {
    const body = { project_id: projectId, name: 'idem-race', scopes: ['keys:manage'] };
    const results = await Promise.all([api.post('/v1/keys', body, idem('race')), api.post('/v1/keys', body, idem('race'))]);
    expect(await t.deps.db.apiKey.count({ where: { projectId, name: 'idem-race' } })).toBe(1);
    const statuses = results.map((r) => r.status).sort();
    // The loser either saw the finished first response (replay) or found it still running (409).
    for (const r of results) {
      if (r.status === 409) expectError(r, 409, 'idempotency_conflict');
      else expect(r.status).toBe(200);
    }
    expect(statuses).toContain(200);
  });

  it('replays errors the first request produced, such as key_name_conflict', async () => {
    const body = { project_id: projectId, name: 'idem-dup', scopes: ['keys:manage'] };
    await api.post('/v1/keys', body);
    const first = await api.post('/v1/keys', body, idem('dup'));
    expectError(first, 409, 'key_name_conflict');
    const second = await api.post('/v1/keys', body, idem('dup'));
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body).toEqual(first.body);
    // The first response as it was: its X-Svc-Request-Id still equals error.request_id (spec §7).
    expectError(second, 409, 'key_name_conflict');
    expect(second.headers['x-svc-request-id']).toBe(first.headers['x-svc-request-id']);
  });

  it('answers 409 for the same key with a different body even when that body is invalid', async () => {
    await api.post('/v1/keys', { project_id: projectId, name: 'idem-invalid', scopes: ['keys:manage'] }, idem('invalid-2nd'));
    expectError(await api.post('/v1/keys', { x: 1 }, idem('invalid-2nd')), 409, 'idempotency_conflict', 'Idempotency-Key');
  });

  it('replays the operator\'s X-Svc-Project: the project the first request addressed', async () => {
    const body = { project_id: projectId, name: 'idem-operator', scopes: ['audit:read'] };
    const first = await operator.post('/v1/keys', body, idem('operator-1'));
    const second = await operator.post('/v1/keys', body, idem('operator-1'));
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(first.headers['x-svc-project']).toBe(projectId);
    expect(second.headers['x-svc-project']).toBe(projectId);
  });

  it('replays only to the key that made the first request: any other key of the project gets 409, whatever its scopes', async () => {
    const body = { project_id: projectId, name: 'idem-scopes', scopes: ['inference:write'] };
    const first = await api.post('/v1/keys', body, idem('scopes'));
    expect(first.status).toBe(200);
    expect(first.body.secret).toMatch(/^svc_sk_/);
    const narrow = await operator.post('/v1/keys', { project_id: projectId, name: 'idem-narrow', scopes: ['keys:manage'] });
    const refused = await client(t.app, narrow.body.secret).post('/v1/keys', body, idem('scopes'));
    expectError(refused, 409, 'idempotency_conflict', 'Idempotency-Key');
    expect(refused.raw).not.toContain(first.body.secret);
    // Without the header it would be 403: it may not grant inference:write.
    expectError(await client(t.app, narrow.body.secret).post('/v1/keys', body), 403, 'insufficient_scope', 'scopes');

    // A twin with exactly the same scopes is another caller too: 409, not the secret of the key the first one created.
    const twin = await operator.post('/v1/keys', {
      project_id: projectId,
      name: 'idem-twin',
      scopes: ['keys:manage', 'audit:read', 'inference:write', 'governance:manage', 'usage:read'],
    });
    const twinRes = await client(t.app, twin.body.secret).post('/v1/keys', body, idem('scopes'));
    expectError(twinRes, 409, 'idempotency_conflict', 'Idempotency-Key');
    expect(twinRes.headers['idempotent-replayed']).toBeUndefined();
    expect(twinRes.raw).not.toContain(first.body.secret);
    expect(twinRes.raw).not.toContain(first.body.id);
    expect(await t.deps.db.apiKey.count({ where: { projectId, name: 'idem-scopes' } })).toBe(1);

    // The key that asked first still gets its answer replayed, after the others' attempts.
    const again = await api.post('/v1/keys', body, idem('scopes'));
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
  });

  it('replays to the same key after it is rotated (the same key id)', async () => {
    const own = await operator.post('/v1/keys', { project_id: projectId, name: 'idem-rotating', scopes: ['keys:manage'] });
    const body = { project_id: projectId, name: 'idem-by-rotating', scopes: ['keys:manage'] };
    const first = await client(t.app, own.body.secret).post('/v1/keys', body, idem('rotating'));
    expect(first.status).toBe(200);
    const rotated = await operator.post(`/v1/keys/${own.body.id}/rotate`, {});
    expect(rotated.status).toBe(200);
    const replay = await client(t.app, rotated.body.secret).post('/v1/keys', body, idem('rotating'));
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual(first.body);
  });

  it('never replays the operator\'s response to a project key, nor a key\'s to the operator', async () => {
    const body = { project_id: projectId, name: 'key-made', scopes: ['usage:read'] };
    const first = await api.post('/v1/keys', body, idem('key-first'));
    expect(first.status).toBe(200);
    const refused = await operator.post('/v1/keys', body, idem('key-first'));
    expectError(refused, 409, 'idempotency_conflict', 'Idempotency-Key');
    expect(refused.raw).not.toContain(first.body.secret);
  });

  it("never replays the operator's response to a project key, even one holding every scope", async () => {
    const body = { project_id: projectId, name: 'op-made', scopes: ['usage:read'] };
    const first = await operator.post('/v1/keys', body, idem('operator-only'));
    expect(first.status).toBe(200);
    const everything = await operator.post('/v1/keys', { project_id: projectId, name: 'all-scopes', scopes: [...SCOPES] });
    const refused = await client(t.app, everything.body.secret).post('/v1/keys', body, idem('operator-only'));
    expectError(refused, 409, 'idempotency_conflict', 'Idempotency-Key');
    expect(refused.raw).not.toContain(first.body.secret);
  });

  it('replays an operator error for a body project_id that is no project id without echoing it into a header', async () => {
    const body = { project_id: 'prj_x\r\nSet-Cookie: evil=1', name: 'crlf', scopes: ['usage:read'] };
    const first = await operator.post('/v1/keys', body, idem('crlf'));
    expectError(first, 404, 'not_found', 'project_id');
    const again = await operator.post('/v1/keys', body, idem('crlf'));
    expect(again.headers['idempotent-replayed']).toBe('true');
    expectError(again, 404, 'not_found', 'project_id');
    expect(again.headers['x-svc-request-id']).toBe(first.body.error.request_id);
    expect(again.headers['x-svc-project']).toBe('');
    expect(again.headers['set-cookie']).toBeUndefined();
  });

  it("scopes the operator's key by a project_id given in the query too", async () => {
    const a = await seedProject(operator);
    const b = await seedProject(operator);
    const body = { name: 'query-scoped', scopes: ['usage:read'] };
    const inA = await operator.post(`/v1/keys?project_id=${a.projectId}`, body, idem('query-scope'));
    const inB = await operator.post(`/v1/keys?project_id=${b.projectId}`, body, idem('query-scope'));
    expect([inA.status, inB.status]).toEqual([200, 200]);
    expect([inA.body.project_id, inB.body.project_id]).toEqual([a.projectId, b.projectId]);
    const replay = await operator.post(`/v1/keys?project_id=${a.projectId}`, body, idem('query-scope'));
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['x-svc-project']).toBe(a.projectId);
  });

  it('is scoped by project: another project may use the same key', async () => {
    const other = await seedProject(operator);
    const a = await api.post('/v1/keys', { project_id: projectId, name: 'idem-scope', scopes: ['keys:manage'] }, idem('shared'));
    const b = await client(t.app, other.secret).post(
      '/v1/keys',
      { project_id: other.projectId, name: 'idem-scope', scopes: ['keys:manage'] },
      idem('shared'),
    );
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.headers['idempotent-replayed']).toBeUndefined();
  });

  it('expires after 24 hours', async () => {
    const body = { project_id: projectId, name: 'idem-old', scopes: ['keys:manage'] };
    const first = await api.post('/v1/keys', body, idem('old'));
    t.clock.advanceHours(24);
    const res = await api.post('/v1/keys', body, idem('old'));
    expectError(res, 409, 'key_name_conflict'); // executed again, not replayed
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect(first.status).toBe(200);
  });

  it('refuses a key over 255 characters', async () => {
    const res = await api.post('/v1/keys', { project_id: projectId, name: 'idem-long', scopes: ['keys:manage'] }, idem('x'.repeat(256)));
    expectError(res, 400, 'invalid_request', 'Idempotency-Key');
  });
});

describe('deeply nested JSON (issue 14)', () => {
  const deepArray = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
  const deepObject = (levels: number) => '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);

  it.each([
    ['/v1/keys', deepObject(100_000)],
    ['/v1/keys', deepArray(100_000)],
    ['/v1/webhooks', `{"project_id":"${'x'}","url":"https://127.0.0.1:9/x","events":${deepArray(100_000)}}`],
    ['/v1/inference', `{"model":"auto","messages":${deepArray(100_000)}}`],
  ])('100,000 levels on %s with an Idempotency-Key: 400 invalid_request, as without the header', async (url, payload) => {
    const without = await api.post(url, payload);
    expect(without.status).toBe(400);
    const withKey = await api.post(url, payload, idem(`deep-${url}-${payload.length}-${payload[1]}`));
    expectError(withKey, 400, 'invalid_request', without.body.error.param);
    expect(withKey.body.error.message).toBe(without.body.error.message);
    expect(t.logs.text).not.toMatch(/Maximum call stack|RangeError/);
    // Kept like any 400: the retry is replayed.
    const again = await api.post(url, payload, idem(`deep-${url}-${payload.length}-${payload[1]}`));
    expect(again.headers['idempotent-replayed']).toBe('true');
    expectError(again, 400, 'invalid_request', without.body.error.param);
  });
});

describe('stored responses', () => {
  it('keep no secret in clear: the created key secret is sealed at rest and still replayed', async () => {
    const body = { project_id: projectId, name: 'idem-sealed', scopes: ['keys:manage'] };
    const first = await api.post('/v1/keys', body, idem('sealed'));
    expect(first.body.secret).toMatch(/^svc_sk_/);
    const replay = await api.post('/v1/keys', body, idem('sealed'));
    expect(replay.body.secret).toBe(first.body.secret);
    const raw = t.deps.redis
      ? JSON.stringify(await t.deps.redis.get(`${t.config.redisPrefix}idem:{${projectId}}:sealed`))
      : JSON.stringify(await t.deps.db.idempotencyRecord.findMany({ where: { key: 'sealed' } }));
    expect(raw.length).toBeGreaterThan(20);
    expect(raw).not.toContain(first.body.secret);
    expect(raw).not.toContain('idem-sealed');
  });
});
