import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { webhookEnv } from '../webhooks/support.ts';
import { gqlClient, type Gql } from './gql.ts';

// The same action through REST and through GraphQL, each in its own project at the same (fake) time: the stored
// rows, the audit rows and the events must be the same once the ids that differ by construction are named alike.

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

interface Side {
  projectId: string;
  adminKeyId: string;
  secret: string;
}

async function twoProjects(scopes = ['keys:manage', 'governance:manage', 'budgets:manage']): Promise<[Side, Side]> {
  const a = await seedProject(operator, { scopes, name: 'parity' });
  const b = await seedProject(operator, { scopes, name: 'parity' });
  return [
    { projectId: a.projectId, adminKeyId: a.keyId, secret: a.secret },
    { projectId: b.projectId, adminKeyId: b.keyId, secret: b.secret },
  ];
}

/** Everything the project stored, with secrets dropped and ids replaced by their role. */
async function stored(side: Side, ids: Record<string, string> = {}) {
  const prisma = t.deps.db;
  const where = { projectId: side.projectId };
  const snapshot = {
    project: await prisma.project.findUnique({ where: { id: side.projectId } }),
    keys: await prisma.apiKey.findMany({ where, orderBy: { id: 'asc' } }),
    audit: await prisma.auditEvent.findMany({ where, orderBy: { id: 'asc' } }),
    events: await prisma.event.findMany({ where, orderBy: { id: 'asc' } }),
    webhooks: await prisma.webhook.findMany({ where, orderBy: { id: 'asc' } }),
    deliveries: await prisma.webhookDelivery.findMany({ where, orderBy: { id: 'asc' } }),
  };
  const names: Record<string, string> = { [side.projectId]: '<project>', [side.adminKeyId]: '<admin key>', ...ids };
  const text = JSON.stringify(snapshot, (k, v) => {
    if (['secretHash', 'previousSecretHash', 'secretLast4', 'secretEncrypted', 'name', 'activeName'].includes(k)) return '<dropped>';
    if (typeof v === 'bigint') return v.toString();
    return v;
  });
  return JSON.parse(
    text
      .replace(/"(prj|key|wh|del|evt|aud|att)_[0-9a-z]{26}"/g, (m) => JSON.stringify(names[JSON.parse(m)] ?? `<${m.slice(1, m.indexOf('_'))}>`))
      .replace(/"req_[0-9a-z]{26}"/g, '"<request>"'),
  );
}

describe('REST and GraphQL give the same stored state, audit rows and events', () => {
  it('createKey', async () => {
    const [rest, graph] = await twoProjects();
    const input = { scopes: ['keys:manage'], budget_usd: 7.25, expires_at: Math.floor(t.clock.now() / 1000) + 86_400 };
    const viaRest = await client(t.app, rest.secret).post('/v1/keys', { project_id: rest.projectId, name: 'ci', ...input });
    const viaGraph = await gql(
      `mutation($i: CreateKeyInput!) { createKey(input: $i) { key { id } } }`,
      { i: { projectId: graph.projectId, name: 'ci', scopes: input.scopes, budgetUsd: input.budget_usd, expiresAt: input.expires_at } },
      { key: graph.secret },
    );
    const restKey = viaRest.body.id;
    const graphKey = viaGraph.body.data.createKey.key.id;
    expect(await stored(graph, { [graphKey]: '<new key>' })).toEqual(await stored(rest, { [restKey]: '<new key>' }));
    const audit = (await stored(graph, { [graphKey]: '<new key>' })).audit;
    expect(audit.at(-1)).toMatchObject({ action: 'key.create', actorKeyId: '<admin key>', targetId: '<new key>' });
  });

  it('rotateKey', async () => {
    const [rest, graph] = await twoProjects();
    await client(t.app, rest.secret).post(`/v1/keys/${rest.adminKeyId}/rotate`, { overlap_hours: 12 });
    const res = await gql(`mutation($id: ID!) { rotateKey(id: $id, overlapHours: 12) { secret } }`, { id: graph.adminKeyId }, { key: graph.secret });
    expect(res.body.errors).toBeUndefined();
    const r = await stored(rest);
    expect(await stored(graph)).toEqual(r);
    expect(r.audit.at(-1)).toMatchObject({ action: 'key.rotate', targetId: '<admin key>', data: { overlap_hours: 12 } });
    expect(r.events.map((e: any) => e.type)).toEqual(['key.rotated']);
    expect(r.events[0].data).toEqual({ key_id: '<admin key>', previous_secret_expires_at: Math.floor(t.clock.now() / 1000) + 12 * 3600 });
  });

  it('revokeKey, twice', async () => {
    const [rest, graph] = await twoProjects();
    // A webhook subscribed to key.revoked gets one pending delivery from either surface.
    for (const side of [rest, graph]) {
      await client(t.app, side.secret).post('/v1/webhooks', { project_id: side.projectId, url: 'https://127.0.0.1:9/hook', events: ['key.revoked'] });
    }
    // Scopes the revoking key holds: a key revokes only keys whose scopes it holds (issue 14).
    const restKey = (await operator.post('/v1/keys', { project_id: rest.projectId, name: 'doomed', scopes: ['keys:manage'] })).body.id;
    const graphKey = (await operator.post('/v1/keys', { project_id: graph.projectId, name: 'doomed', scopes: ['keys:manage'] })).body.id;
    for (let i = 0; i < 2; i++) {
      await client(t.app, rest.secret).post(`/v1/keys/${restKey}/revoke`);
      const res = await gql(`mutation($id: ID!) { revokeKey(id: $id) { status } }`, { id: graphKey }, { key: graph.secret });
      expect(res.body.data.revokeKey.status).toBe('revoked');
    }
    const r = await stored(rest, { [restKey]: '<revoked key>' });
    expect(await stored(graph, { [graphKey]: '<revoked key>' })).toEqual(r);
    expect(r.audit.filter((a: any) => a.action === 'key.revoke')).toHaveLength(1);
    expect(r.events.map((e: any) => [e.type, e.data])).toEqual([['key.revoked', { key_id: '<revoked key>' }]]);
    expect(r.deliveries.map((d: any) => [d.eventType, d.status])).toEqual([['key.revoked', 'pending']]);
  });

  it('createWebhook and disableWebhook', async () => {
    const [rest, graph] = await twoProjects();
    const restHook = (await client(t.app, rest.secret).post('/v1/webhooks', { project_id: rest.projectId, url: 'https://127.0.0.1:9/a', events: ['key.rotated'] })).body;
    const graphHook = (
      await gql(
        `mutation($i: CreateWebhookInput!) { createWebhook(input: $i) { secret webhook { id url events status createdAt } } }`,
        { i: { projectId: graph.projectId, url: 'https://127.0.0.1:9/a', events: ['key.rotated'] } },
        { key: graph.secret },
      )
    ).body.data.createWebhook;
    expect(graphHook.secret).toMatch(/^whsec_/);
    expect(graphHook.webhook).toEqual({ id: graphHook.webhook.id, url: restHook.url, events: restHook.events, status: 'active', createdAt: restHook.created_at });
    await client(t.app, rest.secret).post(`/v1/webhooks/${restHook.id}/disable`);
    await gql(`mutation($id: ID!) { disableWebhook(id: $id) { status } }`, { id: graphHook.webhook.id }, { key: graph.secret });
    const ids = (side: 'rest' | 'graph') => ({ [side === 'rest' ? restHook.id : graphHook.webhook.id]: '<webhook>' });
    expect(await stored(graph, ids('graph'))).toEqual(await stored(rest, ids('rest')));
  });

  it('updateRateLimits and updateBudget', async () => {
    const [rest, graph] = await twoProjects();
    await client(t.app, rest.secret).put(`/v1/projects/${rest.projectId}/rate-limits`, { requests_per_minute: 120, tokens_per_minute: 9000, burst: 5 });
    await client(t.app, rest.secret).put(`/v1/projects/${rest.projectId}/budget`, { budget_usd: 250 });
    const res = await gql(
      `mutation($p: ID!) {
        updateRateLimits(projectId: $p, input: { requestsPerMinute: 120, tokensPerMinute: 9000, burst: 5 }) { requestsPerMinute }
        updateBudget(projectId: $p, budgetUsd: 250) { budgetUsd }
      }`,
      { p: graph.projectId },
      { key: graph.secret },
    );
    expect(res.body.errors).toBeUndefined();
    const r = await stored(rest);
    expect(await stored(graph)).toEqual(r);
    expect(r.events.map((e: any) => e.data.policy)).toEqual(['rate_limits', 'budget']);
  });
});

describe('REST and GraphQL give the same errors', () => {
  it('for the same bad requests', async () => {
    const [side] = await twoProjects(['keys:manage', 'governance:manage', 'budgets:manage', 'audit:read']);
    const api = client(t.app, side.secret);
    const narrow = await operator.post('/v1/keys', { project_id: side.projectId, name: 'narrow', scopes: ['keys:manage'] });
    const pairs: [Promise<any>, Promise<any>][] = [
      [
        api.post('/v1/keys', { project_id: side.projectId, name: 'x', scopes: ['nope'] }),
        gql(`mutation { createKey(input: { projectId: "${side.projectId}", name: "x", scopes: ["nope"] }) { secret } }`, {}, { key: side.secret }),
      ],
      [
        api.post(`/v1/keys/${side.adminKeyId}/rotate`, { overlap_hours: 500 }),
        gql(`mutation { rotateKey(id: "${side.adminKeyId}", overlapHours: 500) { secret } }`, {}, { key: side.secret }),
      ],
      [api.post('/v1/keys/key_missing/revoke'), gql(`mutation { revokeKey(id: "key_missing") { id } }`, {}, { key: side.secret })],
      [
        api.put(`/v1/projects/${side.projectId}/rate-limits`, { requests_per_minute: 0, tokens_per_minute: 1, burst: 0 }),
        gql(`mutation { updateRateLimits(projectId: "${side.projectId}", input: { requestsPerMinute: 0, tokensPerMinute: 1, burst: 0 }) { burst } }`, {}, { key: side.secret }),
      ],
      [api.get('/v1/audit/events?action='), gql(`{ auditEvents(action: "") { edges { cursor } } }`, {}, { key: side.secret })],
      [
        api.get(`/v1/audit/events?action=${'a'.repeat(101)}`),
        gql(`{ auditEvents(action: "${'a'.repeat(101)}") { edges { cursor } } }`, {}, { key: side.secret }),
      ],
      [
        client(t.app, narrow.body.secret).post(`/v1/keys/${side.adminKeyId}/rotate`),
        gql(`mutation { rotateKey(id: "${side.adminKeyId}") { secret } }`, {}, { key: narrow.body.secret }),
      ],
      [
        api.post('/v1/webhooks', { project_id: side.projectId, url: 'http://example.com/hook', events: ['key.revoked'] }),
        gql(`mutation { createWebhook(input: { projectId: "${side.projectId}", url: "http://example.com/hook", events: ["key.revoked"] }) { secret } }`, {}, { key: side.secret }),
      ],
    ];
    for (const [restCall, gqlCall] of pairs) {
      const [r, g] = [await restCall, await gqlCall];
      const e = g.body.errors[0];
      expect({ code: e.extensions.code, param: e.extensions.param, message: e.message, status: e.extensions.http_status }).toEqual({
        code: r.body.error.code,
        param: r.body.error.param,
        message: r.body.error.message,
        status: r.status,
      });
    }
  });

  it('for an explicit null in a routing policy update (the message is the schema\'s on REST)', async () => {
    const [side] = await twoProjects(['governance:manage', 'inference:write']);
    const api = client(t.app, side.secret);
    const created = await api.post('/v1/routing/policies', { project_id: side.projectId, name: 'p', strategy: 'cheapest', targets: [{ model: 'mock-1' }] });
    expect(created.status, created.raw).toBe(200);
    for (const field of ['name', 'strategy'] as const) {
      const r = await api.post(`/v1/routing/policies/${created.body.id}`, { [field]: null });
      const g = await gql(`mutation { updateRoutingPolicy(id: "${created.body.id}", input: { ${field}: null }) { name } }`, {}, { key: side.secret });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'invalid_request', param: field });
      expect(g.body.errors[0].extensions).toMatchObject({ code: 'invalid_request', param: field, http_status: 400 });
    }
    const audit = await t.deps.db.auditEvent.count({ where: { projectId: side.projectId, action: 'routing_policy.update' } });
    expect(audit).toBe(0);
  });
});
