import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProviderRegistry } from '../../src/providers/router.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp, swapPiece } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { startMockOpenAI, type MockOpenAI } from '../helpers/mock-openai.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { user, writeProvidersFile } from '../inference/fixtures.ts';

let t: TestApp;
let operator: Client;
let api: Client;
let projectId: string;
let cheap: MockOpenAI;
let pricey: MockOpenAI;

beforeAll(async () => {
  [cheap, pricey] = await Promise.all([startMockOpenAI(), startMockOpenAI()]);
  const file = writeProvidersFile({
    providers: [
      {
        name: 'cheap',
        kind: 'openai',
        base_url: cheap.url,
        region: 'eu-west-1',
        models: [{ id: 'gpt-a', input_per_mtok: 1, output_per_mtok: 1 }],
      },
      {
        name: 'pricey',
        kind: 'openai',
        base_url: pricey.url,
        region: 'eu-west-1',
        models: [
          { id: 'gpt-a', input_per_mtok: 5, output_per_mtok: 5 },
          { id: 'gpt-b', input_per_mtok: 2, output_per_mtok: 2 },
        ],
      },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1000' } });
  operator = client(t.app);
  ({ projectId, api } = await newProject());
});
afterAll(async () => {
  await t.close();
  await Promise.all([cheap.close(), pricey.close()]);
});
beforeEach(() => {
  cheap.reset();
  pricey.reset();
});

async function newProject(scopes = ['governance:manage', 'inference:write']) {
  const seeded = await seedProject(operator, { scopes, plan: 'growth' });
  return { projectId: seeded.projectId, api: client(t.app, seeded.secret), secret: seeded.secret };
}

const ordered = (pid: string, extra: Record<string, unknown> = {}) => ({
  project_id: pid,
  name: 'prefer pricey',
  strategy: 'ordered',
  targets: [{ provider: 'pricey', model: 'gpt-a' }, { provider: 'cheap', model: 'gpt-a' }],
  ...extra,
});

const auto = (as: Client, pid: string, extra: Record<string, unknown> = {}) =>
  as.post('/v1/inference', { model: 'auto', project_id: pid, messages: user('route me'), ...extra });

describe('routing policies', () => {
  it('creates a policy, audits it and emits policy.updated; the first one becomes the default', async () => {
    const p = await newProject();
    const res = await p.api.post('/v1/routing/policies', ordered(p.projectId, { cache_ttl_s: null }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^pol_/),
      object: 'svc.routing_policy',
      policy_id: res.body.id,
      project_id: p.projectId,
      name: 'prefer pricey',
      strategy: 'ordered',
      targets: [
        { provider: 'pricey', model: 'gpt-a', weight: 1 },
        { provider: 'cheap', model: 'gpt-a', weight: 1 },
      ],
      cache_ttl_s: null,
      is_default: true,
      created_at: Math.floor(t.clock.now() / 1000),
      updated_at: Math.floor(t.clock.now() / 1000),
    });
    const audit = await t.deps.db.auditEvent.findMany({ where: { projectId: p.projectId, action: 'routing_policy.create' } });
    expect(audit.map((a) => a.targetId)).toEqual([res.body.id]);
    const events = await t.deps.db.event.findMany({ where: { projectId: p.projectId, type: 'policy.updated' } });
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ policy: 'routing', action: 'created', policy_id: res.body.id, strategy: 'ordered' });
  });

  it('routes model auto by the default policy, falling back along its order', async () => {
    const p = await newProject();
    expect((await auto(p.api, p.projectId)).body.route).toBe('cheap/gpt-a'); // no policy: cheapest
    await p.api.post('/v1/routing/policies', ordered(p.projectId));
    expect((await auto(p.api, p.projectId)).body.route).toBe('pricey/gpt-a');
    pricey.set({ status: 500 });
    expect((await auto(p.api, p.projectId)).body.route).toBe('cheap/gpt-a');
    // A named model ignores the policy.
    pricey.set({});
    const named = await p.api.post('/v1/inference', { model: 'gpt-a', project_id: p.projectId, messages: user('x') });
    expect(named.body.route).toBe('cheap/gpt-a');
  });

  it('sorts a cheapest policy by price, expanding a target without provider to every provider of the model', async () => {
    const p = await newProject();
    await p.api.post('/v1/routing/policies', {
      project_id: p.projectId,
      name: 'cheapest of two',
      strategy: 'cheapest',
      targets: [{ model: 'gpt-b' }, { model: 'gpt-a' }],
    });
    // gpt-a at cheap (2 per token pair) < gpt-b at pricey (4) < gpt-a at pricey (10).
    expect((await auto(p.api, p.projectId)).body.route).toBe('cheap/gpt-a');
    cheap.set({ status: 503 });
    expect((await auto(p.api, p.projectId)).body.route).toBe('pricey/gpt-b');
  });

  it('picks the first route of a weighted policy by weight', async () => {
    const p = await newProject();
    await p.api.post('/v1/routing/policies', {
      project_id: p.projectId,
      name: 'split',
      strategy: 'weighted',
      targets: [{ provider: 'cheap', model: 'gpt-a', weight: 9 }, { provider: 'pricey', model: 'gpt-b', weight: 1 }],
    });
    const original = t.deps.providers;
    const withRandom = (r: number) =>
      new ProviderRegistry(t.config.providers, {
        clock: t.clock,
        failureThreshold: 1000,
        cooldownMs: 1000,
        routingTimeoutMs: 5000,
        random: () => r,
      });
    try {
      swapPiece(t.deps, 'providers', withRandom(0.5)); // 5 of 10: the weight-9 target
      expect((await auto(p.api, p.projectId)).body.route).toBe('cheap/gpt-a');
      await t.deps.providers.close();
      swapPiece(t.deps, 'providers', withRandom(0.95)); // 9.5 of 10: the weight-1 target
      expect((await auto(p.api, p.projectId)).body.route).toBe('pricey/gpt-b');
      await t.deps.providers.close();
    } finally {
      swapPiece(t.deps, 'providers', original);
    }
  });

  it('caches model auto answers when the policy sets cache_ttl_s, unless the request says cache: false', async () => {
    const p = await newProject();
    await p.api.post('/v1/routing/policies', ordered(p.projectId, { cache_ttl_s: 120 }));
    const first = await auto(p.api, p.projectId);
    const second = await auto(p.api, p.projectId);
    expect([first.body.cache_hit, second.body.cache_hit]).toEqual([false, true]);
    const bypass = await auto(p.api, p.projectId, { cache: false });
    expect(bypass.body.cache_hit).toBe(false);
    expect(pricey.calls).toBe(2);
  });

  it('keeps one default per project; a new policy is not the default unless asked', async () => {
    const p = await newProject();
    const a = await p.api.post('/v1/routing/policies', ordered(p.projectId));
    const b = await p.api.post('/v1/routing/policies', {
      project_id: p.projectId,
      name: 'cheap only',
      strategy: 'ordered',
      targets: [{ provider: 'cheap', model: 'gpt-a' }],
    });
    expect(b.body.is_default).toBe(false);
    expect((await auto(p.api, p.projectId)).body.route).toBe('pricey/gpt-a');
    const promoted = await p.api.post(`/v1/routing/policies/${b.body.id}`, { is_default: true });
    expect(promoted.status).toBe(200);
    expect(promoted.body.is_default).toBe(true);
    expect((await p.api.get(`/v1/routing/policies/${a.body.id}`)).body.is_default).toBe(false);
    expect((await auto(p.api, p.projectId)).body.route).toBe('cheap/gpt-a');
  });

  it('updates partially with POST or PATCH, emitting policy.updated with the new values', async () => {
    const p = await newProject();
    const created = await p.api.post('/v1/routing/policies', ordered(p.projectId));
    t.clock.advance(5_000);
    const renamed = await p.api.post(`/v1/routing/policies/${created.body.id}`, { name: 'renamed' });
    expect(renamed.body).toMatchObject({ name: 'renamed', strategy: 'ordered', targets: created.body.targets });
    expect(renamed.body.updated_at).toBe(created.body.updated_at + 5);
    const patched = await t.app.inject({
      method: 'PATCH',
      url: `/v1/routing/policies/${created.body.id}`,
      headers: { authorization: `Bearer ${p.secret}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ strategy: 'cheapest', cache_ttl_s: 30 }),
    });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ name: 'renamed', strategy: 'cheapest', cache_ttl_s: 30 });
    const events = await t.deps.db.event.findMany({ where: { projectId: p.projectId, type: 'policy.updated' }, orderBy: { id: 'asc' } });
    expect(events.map((e) => (e.data as any).action)).toEqual(['created', 'updated', 'updated']);
    expect(events[2]!.data).toMatchObject({ policy: 'routing', name: 'renamed', strategy: 'cheapest', cache_ttl_s: 30 });
    expect(await t.deps.db.auditEvent.count({ where: { projectId: p.projectId, action: 'routing_policy.update' } })).toBe(2);
  });

  it('deletes a policy; model auto then goes back to cheapest first', async () => {
    const p = await newProject();
    const created = await p.api.post('/v1/routing/policies', ordered(p.projectId));
    const res = await p.api.delete(`/v1/routing/policies/${created.body.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: created.body.id, object: 'svc.routing_policy', policy_id: created.body.id, deleted: true });
    expectError(await p.api.get(`/v1/routing/policies/${created.body.id}`), 404, 'not_found', 'policy_id');
    expect((await auto(p.api, p.projectId)).body.route).toBe('cheap/gpt-a');
    const last = await t.deps.db.event.findFirst({ where: { projectId: p.projectId, type: 'policy.updated' }, orderBy: { id: 'desc' } });
    expect(last!.data).toMatchObject({ policy: 'routing', action: 'deleted', policy_id: created.body.id });
  });

  it('looks absent outside the project the call names (query, body or X-Svc-Project)', async () => {
    const p = await newProject();
    const other = await newProject();
    const created = await p.api.post('/v1/routing/policies', ordered(p.projectId));
    const id = created.body.id;
    const elsewhere = { headers: { 'x-svc-project': other.projectId } };
    expectError(await operator.get(`/v1/routing/policies/${id}`, elsewhere), 404, 'not_found', 'policy_id');
    expectError(await operator.get(`/v1/routing/policies/${id}?project_id=${other.projectId}`), 404, 'not_found', 'policy_id');
    expectError(await operator.delete(`/v1/routing/policies/${id}`, elsewhere), 404, 'not_found', 'policy_id');
    expectError(await operator.post(`/v1/routing/policies/${id}`, { project_id: other.projectId, name: 'moved' }), 404, 'not_found', 'policy_id');
    expectError(await p.api.get(`/v1/routing/policies/${id}?project_id=${other.projectId}`), 404, 'not_found', 'project_id');
    const still = await operator.get(`/v1/routing/policies/${id}`, { headers: { 'x-svc-project': p.projectId } });
    expect(still.status).toBe(200);
    expect(still.body.name).toBe('prefer pricey');
  });

  it('lists newest first with cursor pagination on policy_id', async () => {
    const p = await newProject();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await p.api.post('/v1/routing/policies', ordered(p.projectId, { name: `p${i}` }))).body.id);
    const page1 = await p.api.get('/v1/routing/policies', { query: { limit: 2 } });
    expect(page1.status).toBe(200);
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, url: '/v1/routing/policies' });
    expect(page1.headers['x-svc-page-limit']).toBe('2');
    expect(page1.body.data.map((d: any) => d.policy_id)).toEqual([ids[2], ids[1]]);
    const page2 = await p.api.get('/v1/routing/policies', { query: { limit: 2, starting_after: page1.body.data[1].policy_id } });
    expect(page2.body.data.map((d: any) => d.id)).toEqual([ids[0]]);
    expect(page2.body.has_more).toBe(false);
    expectError(await p.api.get('/v1/routing/policies', { query: { starting_after: 'pol_nope' } }), 400, 'invalid_request', 'starting_after');
  });

  const invalids: Array<[string, Record<string, unknown>, string]> = [
    ['an unknown strategy', { strategy: 'random' }, 'strategy'],
    ['no targets', { targets: [] }, 'targets'],
    ['an unknown model', { targets: [{ model: 'gpt-zzz' }] }, 'targets[0].model'],
    ['a provider that does not serve the model', { targets: [{ provider: 'cheap', model: 'gpt-b' }] }, 'targets[0].provider'],
    ['a weight of 0', { targets: [{ model: 'gpt-a', weight: 0 }] }, 'targets[0].weight'],
    ['an unknown target field', { targets: [{ model: 'gpt-a', region: 'x' }] }, 'targets[0].region'],
    ['an empty name', { name: '' }, 'name'],
    ['cache_ttl_s 0', { cache_ttl_s: 0 }, 'cache_ttl_s'],
    ['an unknown field', { priority: 1 }, 'priority'],
  ];
  for (const [what, change, param] of invalids) {
    it(`refuses ${what}: 400 invalid_request, param ${param}`, async () => {
      const res = await api.post('/v1/routing/policies', ordered(projectId, change));
      expectError(res, 400, 'invalid_request', param);
    });
  }

  it('needs governance:manage to change; reading takes governance:manage or inference:write', async () => {
    const created = await api.post('/v1/routing/policies', ordered(projectId));
    const reader = await seedProject(operator, { scopes: ['inference:write'] });
    const readerApi = client(t.app, reader.secret);
    await expectScopeRequired(readerApi, [
      { method: 'post', url: '/v1/routing/policies', body: ordered(reader.projectId) },
      { method: 'post', url: `/v1/routing/policies/${created.body.id}`, body: { name: 'x' } },
      { method: 'delete', url: `/v1/routing/policies/${created.body.id}` },
    ]);
    expect((await readerApi.get('/v1/routing/policies')).status).toBe(200);
    const nobody = await seedProject(operator, { scopes: ['usage:read'] });
    await expectScopeRequired(client(t.app, nobody.secret), [
      { method: 'get', url: '/v1/routing/policies' },
      { method: 'get', url: `/v1/routing/policies/${created.body.id}` },
    ]);
  });

  it("hides another project's policies", async () => {
    const created = await api.post('/v1/routing/policies', ordered(projectId));
    const other = await newProject();
    await expectHiddenFrom(other.api, [
      { method: 'get', url: `/v1/routing/policies/${created.body.id}` },
      { method: 'post', url: `/v1/routing/policies/${created.body.id}`, body: { name: 'mine now' } },
      { method: 'delete', url: `/v1/routing/policies/${created.body.id}` },
      { method: 'get', url: `/v1/routing/policies?project_id=${projectId}` },
      { method: 'post', url: '/v1/routing/policies', body: ordered(projectId) },
    ]);
    expect((await other.api.get('/v1/routing/policies')).body.data).toEqual([]);
    expect((await api.get(`/v1/routing/policies/${created.body.id}`)).body.name).toBe('prefer pricey');
  });
});
