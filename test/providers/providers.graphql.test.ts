import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectGqlError, gqlClient, type Gql } from '../graphql/gql.ts';

// GraphQL `providers`: the providers file, circuit state and the project's last hour per provider (Models screen).

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const PROVIDERS = `query($p: ID) { providers(projectId: $p) {
  name kind region timeoutMs circuit
  models { id type inputPerMtok outputPerMtok cacheReadPerMtok batchDiscount }
  recent { requests failed errorRate latencyP50Ms latencyP95Ms lastAt }
} }`;

describe('providers', () => {
  it('lists the configured providers with prices, a closed circuit and the project\'s last hour of traffic', async () => {
    const { projectId, secret } = await seedProject(operator, { scopes: ['inference:write', 'models:read'] });
    const key = client(t.app, secret);
    const before = await gql(PROVIDERS, {}, { key: secret });
    expect(before.body.errors, before.raw).toBeUndefined();
    const mock = before.body.data.providers.find((p: { name: string }) => p.name === 'mock');
    expect(mock).toMatchObject({ kind: 'mock', circuit: 'closed', recent: { requests: 0, failed: 0, errorRate: 0, latencyP50Ms: null, lastAt: null } });
    expect(mock.models).toContainEqual({ id: 'mock-1', type: 'chat', inputPerMtok: 0, outputPerMtok: 0, cacheReadPerMtok: null, batchDiscount: null });

    for (let i = 0; i < 3; i++) {
      const res = await key.post('/v1/inference', { model: 'mock-1', project_id: projectId, messages: [{ role: 'user', content: `hello ${i}` }] });
      expect(res.status, res.raw).toBe(200);
    }
    expect(await t.deps.outcomes.flush({ timeoutMs: 10_000 })).toBe(true);
    const after = await gql(PROVIDERS, {}, { key: secret });
    const recent = after.body.data.providers.find((p: { name: string }) => p.name === 'mock').recent;
    expect(recent).toMatchObject({ requests: 3, failed: 0, errorRate: 0 });
    expect(recent.latencyP50Ms).toBeGreaterThanOrEqual(0);
    expect(recent.lastAt).toBe(Math.floor(t.clock.now() / 1000));

    // An hour later the window is empty again.
    t.clock.advance(3_600_001);
    const later = await gql(PROVIDERS, {}, { key: secret });
    expect(later.body.data.providers.find((p: { name: string }) => p.name === 'mock').recent.requests).toBe(0);
  });

  it('shows another project nothing of this one: its own traffic only, another project\'s id is not_found', async () => {
    const a = await seedProject(operator, { scopes: ['inference:write', 'models:read'] });
    const b = await seedProject(operator, { scopes: ['models:read'] });
    expect((await client(t.app, a.secret).post('/v1/inference', { model: 'mock-1', project_id: a.projectId, messages: [{ role: 'user', content: 'x' }] })).status).toBe(200);
    expect(await t.deps.outcomes.flush({ timeoutMs: 10_000 })).toBe(true);
    const own = await gql(PROVIDERS, {}, { key: b.secret });
    expect(own.body.data.providers.find((p: { name: string }) => p.name === 'mock').recent.requests).toBe(0);
    expectGqlError(await gql(PROVIDERS, { p: a.projectId }, { key: b.secret }), 'not_found', { httpStatus: 404 });
    // The operator names the project it looks at.
    const op = await gql(PROVIDERS, { p: a.projectId });
    expect(op.body.data.providers.find((p: { name: string }) => p.name === 'mock').recent.requests).toBe(1);
  });

  it('needs models:read', async () => {
    const { secret } = await seedProject(operator, { scopes: ['usage:read'] });
    expectGqlError(await gql(PROVIDERS, {}, { key: secret }), 'insufficient_scope', { httpStatus: 403 });
  });
});

describe('providers with a failing one', () => {
  it('shows its circuit open and its error rate once a call has failed', async () => {
    const { writeProvidersFile } = await import('../inference/fixtures.ts');
    const file = writeProvidersFile({
      providers: [
        { name: 'cheap', kind: 'mock', region: 'eu-west-1', models: [{ id: 'mock-1', input_per_mtok: 0.5, output_per_mtok: 1.5, cache_read_per_mtok: 0.05 }] },
        // Nothing listens on port 9: every call fails; one failure opens the circuit.
        { name: 'down', kind: 'openai', base_url: 'http://127.0.0.1:9/v1', region: 'us-east-1', timeout_ms: 2000, models: [{ id: 'down-1', input_per_mtok: 3, output_per_mtok: 15 }] },
      ],
    });
    const app = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1', SVC_CIRCUIT_COOLDOWN_MS: '3600000' } });
    try {
      const { projectId, secret } = await seedProject(client(app.app), { scopes: ['inference:write', 'models:read'] });
      const failed = await client(app.app, secret).post('/v1/inference', { model: 'down-1', project_id: projectId, messages: [{ role: 'user', content: 'x' }] });
      expect(failed.status).toBe(503);
      expect(await app.deps.outcomes.flush({ timeoutMs: 10_000 })).toBe(true);
      const res = await gqlClient(app.app)(PROVIDERS, {}, { key: secret });
      expect(res.body.errors, res.raw).toBeUndefined();
      const byName = Object.fromEntries(res.body.data.providers.map((p: { name: string }) => [p.name, p]));
      expect(byName.down).toMatchObject({ kind: 'openai', region: 'us-east-1', timeoutMs: 2000, circuit: 'open', recent: { requests: 1, failed: 1, errorRate: 1 } });
      expect(byName.cheap).toMatchObject({ circuit: 'closed', recent: { requests: 0 } });
      expect(byName.cheap.models[0]).toMatchObject({ id: 'mock-1', inputPerMtok: 0.5, outputPerMtok: 1.5, cacheReadPerMtok: 0.05 });
      // Nothing of the provider's address or key is exposed.
      expect(res.raw).not.toContain('127.0.0.1:9');
    } finally {
      await app.close();
    }
  });
});
