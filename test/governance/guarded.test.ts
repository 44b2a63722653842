import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { uniqueName } from '../helpers/services.ts';
import { gqlClient, type Gql, type GqlResponse } from '../graphql/gql.ts';
import { webhookEnv } from '../webhooks/support.ts';
import { expectGqlQueued, expectQueued, governedProject, type Governed } from './support.ts';

// Every guarded action (CONTRACT §15), on REST and on GraphQL: 403 dual_control_required with approval_id, nothing
// applied, then applied once another key approves.

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

type Res = { status: number; headers: Record<string, unknown>; body: any; raw: string };
type State = Record<string, string>;

interface Case {
  action: string;
  resource: string;
  /** Objects the change acts on, made before the resource is guarded. */
  setup?: (g: Governed) => Promise<State>;
  rest: (api: Client, g: Governed, s: State) => Promise<Res>;
  graphql: { field: string; query: string; variables: (g: Governed, s: State) => Record<string, unknown> };
  /** What the change would alter, read by the operator. */
  observe: (g: Governed, s: State) => Promise<unknown>;
  applied: (after: any, before: any) => void;
}

const ok = (res: Res) => {
  expect(res.status, res.raw).toBe(200);
  return res.body;
};

async function policyOf(g: Governed) {
  return ok(
    await operator.post('/v1/routing/policies', {
      project_id: g.projectId,
      name: uniqueName('pol'),
      strategy: 'ordered',
      targets: [{ model: 'mock-1' }],
    }),
  );
}
async function webhookOf(g: Governed) {
  return ok(await operator.post('/v1/webhooks', { project_id: g.projectId, url: 'https://127.0.0.1:9/hook', events: ['key.revoked'] }));
}
async function targetKey(g: Governed) {
  return ok(await operator.post('/v1/keys', { project_id: g.projectId, name: uniqueName('target'), scopes: ['usage:read'] }));
}

const CASES: Case[] = [
  {
    action: 'rate_limits.update',
    resource: 'rate_limits',
    rest: (api, g) => api.put(`/v1/projects/${g.projectId}/rate-limits`, { requests_per_minute: 11, tokens_per_minute: 1111, burst: 1 }),
    graphql: {
      field: 'updateRateLimits',
      query: 'mutation($p: ID!) { updateRateLimits(projectId: $p, input: {requestsPerMinute: 11, tokensPerMinute: 1111, burst: 1}) { burst } }',
      variables: (g) => ({ p: g.projectId }),
    },
    observe: async (g) => {
      const b = ok(await operator.get(`/v1/projects/${g.projectId}/rate-limits`));
      return { rpm: b.requests_per_minute, tpm: b.tokens_per_minute, burst: b.burst };
    },
    applied: (after) => expect(after).toEqual({ rpm: 11, tpm: 1111, burst: 1 }),
  },
  {
    action: 'budget.update',
    resource: 'budget',
    rest: (api, g) => api.put(`/v1/projects/${g.projectId}/budget`, { budget_usd: 12.5 }),
    graphql: {
      field: 'updateBudget',
      query: 'mutation($p: ID!) { updateBudget(projectId: $p, budgetUsd: 12.5) { budgetUsd } }',
      variables: (g) => ({ p: g.projectId }),
    },
    observe: async (g) => ok(await operator.get(`/v1/projects/${g.projectId}/budget`)).budget_usd,
    applied: (after, before) => {
      expect(before).toBeNull();
      expect(after).toBe(12.5);
    },
  },
  {
    action: 'residency.update',
    resource: 'residency',
    rest: (api, g) => api.put(`/v1/projects/${g.projectId}/residency`, { region: 'eu-west-1' }),
    graphql: {
      field: 'setResidency',
      query: 'mutation($p: ID!) { setResidency(projectId: $p, region: "eu-west-1") { region } }',
      variables: (g) => ({ p: g.projectId }),
    },
    observe: async (g) => ok(await operator.get(`/v1/projects/${g.projectId}`)).region,
    applied: (after, before) => {
      expect(before).toBeNull();
      expect(after).toBe('eu-west-1');
    },
  },
  {
    action: 'routing_policy.create',
    resource: 'routing',
    rest: (api, g) => api.post('/v1/routing/policies', { project_id: g.projectId, name: 'queued', strategy: 'ordered', targets: [{ model: 'mock-1' }] }),
    graphql: {
      field: 'createRoutingPolicy',
      query:
        'mutation($p: ID!) { createRoutingPolicy(input: {projectId: $p, name: "queued", strategy: "ordered", targets: [{model: "mock-1"}]}) { id } }',
      variables: (g) => ({ p: g.projectId }),
    },
    observe: async (g) => ok(await operator.get('/v1/routing/policies', { query: { project_id: g.projectId } })).data.map((p: any) => p.name),
    applied: (after, before) => {
      expect(before).toEqual([]);
      expect(after).toEqual(['queued']);
    },
  },
  {
    action: 'routing_policy.update',
    resource: 'routing',
    setup: async (g) => ({ policyId: (await policyOf(g)).id }),
    rest: (api, _g, s) => api.post(`/v1/routing/policies/${s.policyId}`, { name: 'renamed' }),
    graphql: {
      field: 'updateRoutingPolicy',
      query: 'mutation($id: ID!) { updateRoutingPolicy(id: $id, input: {name: "renamed"}) { id } }',
      variables: (_g, s) => ({ id: s.policyId }),
    },
    observe: async (_g, s) => ok(await operator.get(`/v1/routing/policies/${s.policyId}`)).name,
    applied: (after) => expect(after).toBe('renamed'),
  },
  {
    action: 'routing_policy.delete',
    resource: 'routing',
    setup: async (g) => ({ policyId: (await policyOf(g)).id }),
    rest: (api, _g, s) => api.delete(`/v1/routing/policies/${s.policyId}`),
    graphql: {
      field: 'deleteRoutingPolicy',
      query: 'mutation($id: ID!) { deleteRoutingPolicy(id: $id) { id } }',
      variables: (_g, s) => ({ id: s.policyId }),
    },
    observe: async (_g, s) => (await operator.get(`/v1/routing/policies/${s.policyId}`)).status,
    applied: (after, before) => {
      expect(before).toBe(200);
      expect(after).toBe(404);
    },
  },
  {
    action: 'webhook.create',
    resource: 'webhooks',
    rest: (api, g) => api.post('/v1/webhooks', { project_id: g.projectId, url: 'https://127.0.0.1:9/queued', events: ['key.revoked'] }),
    graphql: {
      field: 'createWebhook',
      query: 'mutation($p: ID!) { createWebhook(input: {projectId: $p, url: "https://127.0.0.1:9/queued", events: ["key.revoked"]}) { secret } }',
      variables: (g) => ({ p: g.projectId }),
    },
    observe: async (g) => ok(await operator.get('/v1/webhooks', { query: { project_id: g.projectId } })).data.map((w: any) => w.url),
    applied: (after, before) => {
      expect(before).toEqual([]);
      expect(after).toEqual(['https://127.0.0.1:9/queued']);
    },
  },
  {
    action: 'webhook.disable',
    resource: 'webhooks',
    setup: async (g) => ({ webhookId: (await webhookOf(g)).id }),
    rest: (api, _g, s) => api.post(`/v1/webhooks/${s.webhookId}/disable`),
    graphql: {
      field: 'disableWebhook',
      query: 'mutation($id: ID!) { disableWebhook(id: $id) { id } }',
      variables: (_g, s) => ({ id: s.webhookId }),
    },
    observe: async (_g, s) => ok(await operator.get(`/v1/webhooks/${s.webhookId}`)).status,
    applied: (after, before) => {
      expect(before).toBe('active');
      expect(after).toBe('disabled');
    },
  },
  {
    action: 'webhook.delivery.replay',
    resource: 'webhooks',
    setup: async (g) => {
      const webhook = await webhookOf(g);
      const target = await targetKey(g);
      ok(await operator.post(`/v1/keys/${target.id}/revoke`));
      const [delivery] = ok(await operator.get(`/v1/webhooks/${webhook.id}/deliveries`)).data;
      // A delivery that failed for good (CONTRACT §6: only those are replayed), without waiting a day of retries.
      await t.deps.db.webhookDelivery.update({ where: { id: delivery.id }, data: { status: 'failed', nextAttemptAt: null } });
      return { webhookId: webhook.id, deliveryId: delivery.id };
    },
    rest: (api, _g, s) => api.post(`/v1/webhooks/${s.webhookId}/deliveries/${s.deliveryId}/replay`),
    graphql: {
      field: 'replayDelivery',
      query: 'mutation($w: ID!, $d: ID!) { replayDelivery(webhookId: $w, deliveryId: $d) { id } }',
      variables: (_g, s) => ({ w: s.webhookId, d: s.deliveryId }),
    },
    observe: async (_g, s) => ok(await operator.get(`/v1/webhooks/${s.webhookId}/deliveries`)).data.length,
    applied: (after, before) => {
      expect(before).toBe(1);
      expect(after).toBe(2);
    },
  },
  {
    action: 'key.create',
    resource: 'keys',
    rest: (api, g) => api.post('/v1/keys', { project_id: g.projectId, name: 'queued-key', scopes: ['usage:read'] }),
    graphql: {
      field: 'createKey',
      query: 'mutation($p: ID!) { createKey(input: {projectId: $p, name: "queued-key", scopes: ["usage:read"]}) { secret } }',
      variables: (g) => ({ p: g.projectId }),
    },
    observe: async (g) => ok(await operator.get('/v1/keys', { query: { project_id: g.projectId } })).data.map((k: any) => k.name).filter((n: string) => n === 'queued-key'),
    applied: (after, before) => {
      expect(before).toEqual([]);
      expect(after).toEqual(['queued-key']);
    },
  },
  {
    action: 'key.rotate',
    resource: 'keys',
    setup: async (g) => ({ keyId: (await targetKey(g)).id }),
    rest: (api, _g, s) => api.post(`/v1/keys/${s.keyId}/rotate`, { overlap_hours: 1 }),
    graphql: {
      field: 'rotateKey',
      query: 'mutation($id: ID!) { rotateKey(id: $id, overlapHours: 1) { secret } }',
      variables: (_g, s) => ({ id: s.keyId }),
    },
    observe: async (_g, s) => ok(await operator.get(`/v1/keys/${s.keyId}`)).secret,
    applied: (after, before) => expect(after).not.toBe(before),
  },
  {
    action: 'key.revoke',
    resource: 'keys',
    setup: async (g) => ({ keyId: (await targetKey(g)).id }),
    rest: (api, _g, s) => api.post(`/v1/keys/${s.keyId}/revoke`),
    graphql: {
      field: 'revokeKey',
      query: 'mutation($id: ID!) { revokeKey(id: $id) { id } }',
      variables: (_g, s) => ({ id: s.keyId }),
    },
    observe: async (_g, s) => ok(await operator.get(`/v1/keys/${s.keyId}`)).status,
    applied: (after, before) => {
      expect(before).toBe('active');
      expect(after).toBe('revoked');
    },
  },
  {
    action: 'governance.update',
    // Not itself a listed resource: guarded because the list is non-empty.
    resource: 'budget',
    rest: (api, g) => api.put(`/v1/projects/${g.projectId}/governance`, { dual_control: ['keys', 'budget'] }),
    graphql: {
      field: 'setGovernancePolicy',
      query: 'mutation($p: ID!) { setGovernancePolicy(projectId: $p, dualControl: ["keys", "budget"]) { dualControl } }',
      variables: (g) => ({ p: g.projectId }),
    },
    observe: async (g) => ok(await operator.get(`/v1/projects/${g.projectId}/governance`)).dual_control,
    applied: (after, before) => {
      expect(before).toEqual(['budget']);
      expect(after).toEqual(['budget', 'keys']);
    },
  },
];

describe.each(['rest', 'graphql'] as const)('every guarded action over %s', (surface) => {
  it.each(CASES.map((c) => [c.action, c] as const))('%s waits for a second key, then applies', async (_name, c) => {
    const g = await governedProject(operator, []);
    const s = c.setup ? await c.setup(g) : {};
    ok(await operator.put(`/v1/projects/${g.projectId}/governance`, { dual_control: [c.resource] }));
    const before = await c.observe(g, s);

    let approvalId: string;
    if (surface === 'rest') {
      approvalId = expectQueued(await c.rest(client(t.app, g.requester.secret), g, s));
    } else {
      approvalId = expectGqlQueued(await gql(c.graphql.query, c.graphql.variables(g, s), { key: g.requester.secret }), c.graphql.field);
    }
    expect(await c.observe(g, s)).toEqual(before);

    const approver = client(t.app, g.approver.secret);
    const pending = ok(await approver.get(`/v1/approvals/${approvalId}`));
    expect(pending).toMatchObject({
      id: approvalId,
      object: 'svc.approval',
      project_id: g.projectId,
      action: c.action,
      requested_by: g.requester.id,
      status: 'pending',
      decided_by: null,
      decided_at: null,
    });
    expect(pending.expires_at - pending.created_at).toBe(24 * 3600);

    let decided: any;
    if (surface === 'rest') {
      decided = ok(await approver.post(`/v1/approvals/${approvalId}/approve`));
    } else {
      const res: GqlResponse = await gql('mutation($id: ID!) { approveApproval(id: $id) { id status decidedBy error } }', { id: approvalId }, { key: g.approver.secret });
      expect(res.body.errors, res.raw).toBeUndefined();
      decided = { status: res.body.data.approveApproval.status, decided_by: res.body.data.approveApproval.decidedBy, error: res.body.data.approveApproval.error };
    }
    expect(decided).toMatchObject({ status: 'approved', decided_by: g.approver.id, error: null });
    c.applied(await c.observe(g, s), before);
  });
});
