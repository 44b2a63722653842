import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedProject, type Seeded } from '../helpers/app.ts';
import { pollUntil, type Answer, type GatewayProcess } from '../helpers/gateway-process.ts';
import { NO_SERVICES, NO_SERVICES_REASON, openServices, type TestServices } from '../helpers/private-services.ts';
import { provisionOperator, scimOf, signInOn, startReplica } from '../helpers/processes.ts';
import { PATCH_SCHEMA, ssoEnv, testSamlIdp, testSigningKeys } from '../helpers/sso.ts';
import { deploy, five, infer, MODEL, OPEN_PROJECT, tally, type Deployment } from '../system/replicas/support.ts';

/**
 * The cross-replica claims of the docs, each made on one gateway PROCESS and observed from another over Redis (the
 * in-process bus two app instances of one test process would share plays no part here):
 * - response cache: an entry stored by one replica is a hit on the other (the store is Redis); switching the project to
 *   zero retention on one turns the cache off on the other (the project cache evicted over `deps.bus`);
 * - residency: a pin set on one is enforced by the other's next inference (project cache, `deps.bus`);
 * - SCIM deprovisioning: the operator's session made on one is refused on the other (sessions live in Redis only);
 * - template cache: a version published on one is what the other's next templated inference uses (template cache,
 *   `deps.bus`);
 * - limits: new rate limits set on one bind the other's next requests (limiter cache, `deps.bus`).
 */
let services: TestServices;
let d: Deployment;
let a: GatewayProcess;
let b: GatewayProcess;
let idp: ReturnType<typeof testSamlIdp>;

const SCOPES = ['inference:write', 'governance:manage', 'templates:manage', 'keys:manage'];

/** How soon the other replica must see a change: pub/sub on loopback takes milliseconds, a poll an inference (long on a loaded machine); the caches' TTLs are 60 s. */
const PROPAGATION_MS = 5_000;

async function seen<T>(what: string, check: () => Promise<T | null | false>): Promise<T> {
  const started = performance.now();
  const v = await pollUntil(what, check, PROPAGATION_MS, 10);
  return Object.assign(v as object, { afterMs: Math.round(performance.now() - started) }) as T;
}

const cached = (g: GatewayProcess, s: Seeded, content: string, region?: string): Promise<Answer> =>
  g.call('POST', '/v1/inference', { key: s.secret, body: { model: MODEL, project_id: s.projectId, messages: [{ role: 'user', content }], cache: 60, ...(region ? { region } : {}) } });

describe.skipIf(NO_SERVICES)(NO_SERVICES ? `cross-replica claims (${NO_SERVICES_REASON})` : 'cross-replica claims, across two gateway processes over Redis', () => {
  beforeAll(async () => {
    const keys = testSigningKeys();
    idp = testSamlIdp(keys);
    services = await openServices();
    d = await deploy(services, ssoEnv(keys.cert));
    [a, b] = await Promise.all([startReplica(d), startReplica(d)]);
    expect(a.pid).not.toBe(b.pid);
  }, 300_000);

  afterAll(async () => {
    await d?.close();
    await services?.close();
  });

  it('response cache: a hit on the other replica; zero retention set on one turns the cache off on the other', { timeout: 30_000 }, async () => {
    const s = await seedProject(a, { ...OPEN_PROJECT, scopes: SCOPES });
    const prompt = randomUUID().slice(0, 8);
    const first = await cached(a, s, prompt);
    expect([first.status, first.headers['x-svc-cache'], first.body.cache_hit]).toEqual([200, 'miss', false]);
    const calls = d.mock.calls;
    const hit = await cached(b, s, prompt);
    expect(first.body.message.content).toEqual(expect.any(String));
    expect([hit.status, hit.headers['x-svc-cache'], hit.body.cache_hit, hit.body.message]).toEqual([200, 'hit', true, first.body.message]);
    expect(d.mock.calls).toBe(calls);

    // b's project cache holds the project (standard retention) from the hit above.
    const zero = await a.call('PUT', `/v1/projects/${s.projectId}/retention`, { key: s.secret, body: { mode: 'zero' } });
    expect(zero.status).toBe(200);
    const off = await seen('the cache off on the other replica', async () => {
      const r = await cached(b, s, prompt);
      return r.status === 200 && r.body.cache_hit === false ? r : null;
    });
    // Served uncached: no cache header at all, the provider called.
    expect(off.headers['x-svc-cache']).toBeUndefined();
    expect(d.mock.calls).toBeGreaterThan(calls);
    console.info(`zero retention on a: cache off on b after ${(off as any).afterMs} ms`);
  });

  it('residency: a pin set on one replica is enforced by the other; unpinning there too', { timeout: 30_000 }, async () => {
    const s = await seedProject(a, { ...OPEN_PROJECT, scopes: SCOPES });
    // b loads the project (unpinned) into its cache: a request for region local passes.
    expect((await cached(b, s, five(1), 'local')).status).toBe(200);
    const pin = await a.call('PUT', `/v1/projects/${s.projectId}/residency`, { key: s.secret, body: { region: 'eu-west-1' } });
    expect([pin.status, pin.body.region]).toEqual([200, 'eu-west-1']);
    const refused = await seen('the pin enforced on the other replica', async () => {
      const r = await cached(b, s, five(2), 'local');
      return r.status === 403 ? r : null;
    });
    expect(refused.body.error).toMatchObject({ code: 'residency_violation', param: 'region' });
    expect((await a.call('PUT', `/v1/projects/${s.projectId}/residency`, { key: s.secret, body: { region: null } })).status).toBe(200);
    const passes = await seen('the unpin seen on the other replica', async () => {
      const r = await cached(b, s, five(3), 'local');
      return r.status === 200 ? r : null;
    });
    expect(passes.body.region).toBe('local');
    console.info(`residency pin on a: refused on b after ${(refused as any).afterMs} ms; unpin seen after ${(passes as any).afterMs} ms`);
  });

  it('SCIM deprovisioning on one replica: the operator\'s session made on the other is refused there at once', { timeout: 30_000 }, async () => {
    for (const [how, deprovision] of [
      ['DELETE', (id: string) => scimOf(a)('DELETE', `/scim/v2/Users/${id}`)],
      ['PATCH active false', (id: string) => scimOf(a)('PATCH', `/scim/v2/Users/${id}`, { schemas: [PATCH_SCHEMA], Operations: [{ op: 'replace', path: 'active', value: false }] })],
    ] as const) {
      const user = `${randomUUID().slice(0, 8)}@example.com`;
      const id = await provisionOperator(a, user);
      const session = await signInOn(b, idp, user);
      expect((await session.call(b, 'GET', '/auth/session')).status).toBe(200);
      // The same session works on a too: it lives in Redis, not in the replica that made it.
      expect((await session.call(a, 'GET', '/auth/session')).status).toBe(200);
      const gone = await deprovision(id);
      expect(gone.status, how).toBe(how === 'DELETE' ? 204 : 200);
      // No polling: there is no per-replica copy to evict, so the very next request is refused.
      const onB = await session.call(b, 'GET', '/auth/session');
      expect([onB.status, onB.body?.error?.code], how).toEqual([401, 'invalid_api_key']);
    }
  });

  it('template cache: a version published on one replica is what the other\'s next templated inference uses', { timeout: 30_000 }, async () => {
    const s = await seedProject(a, { ...OPEN_PROJECT, scopes: SCOPES });
    const created = await a.call('POST', '/v1/templates', {
      key: s.secret,
      body: { project_id: s.projectId, name: `t-${randomUUID().slice(0, 8)}`, model: MODEL, messages: [{ role: 'user', content: 'one {{x}}' }], variables: [{ name: 'x' }] },
    });
    expect(created.status).toBe(200);
    const templated = (g: GatewayProcess) =>
      g.call('POST', '/v1/inference', { key: s.secret, body: { project_id: s.projectId, template: { id: created.body.id, variables: { x: 'y' } } } });
    // b caches the template's latest (version 1), warm: a second call runs from the cache.
    for (let i = 0; i < 2; i++) expect([(await templated(b)).body.template_version]).toEqual([1]);
    const v2 = await a.call('POST', `/v1/templates/${created.body.id}/versions`, {
      key: s.secret,
      body: { model: MODEL, messages: [{ role: 'user', content: 'two {{x}}' }], variables: [{ name: 'x' }] },
    });
    expect([v2.status, v2.body.latest_version ?? v2.body.version]).toEqual([200, 2]);
    let last: Answer | null = null;
    const next = await seen(`version 2 on the other replica`, async () => {
      const r = await templated(b);
      last = r;
      return r.status === 200 && r.body.template_version === 2 ? r : null;
    }).catch((err: Error) => {
      throw new Error(`${err.message}; b's last answer: ${JSON.stringify([last?.status, last?.body?.template_version, last?.body?.error])}`);
    });
    // What the provider got from b: version 2's message.
    expect(JSON.stringify(d.mock.requests.at(-1)?.body)).toContain('two y');
    console.info(`template v2 published on a: used by b after ${(next as any).afterMs} ms`);
  });

  it('limits: rate limits set on one replica bind the other\'s next requests exactly', { timeout: 30_000 }, async () => {
    const s = await seedProject(a, { ...OPEN_PROJECT, scopes: SCOPES });
    // b reads the open limits into its limiter cache.
    expect((await infer(b, s, five(0))).status).toBe(200);
    // With the operator key: the project's own key would take a request of the window.
    const put = await a.call('PUT', `/v1/projects/${s.projectId}/rate-limits`, { body: { requests_per_minute: 5, tokens_per_minute: 1_000_000_000, burst: 0 } });
    expect(put.status).toBe(200);
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => infer(b, s, five(i + 1))));
    const t = tally(answers);
    // At most the new limit passes (the one request before the change may already count against it).
    expect(t['200']).toBeGreaterThanOrEqual(4);
    expect(t['200']).toBeLessThanOrEqual(5);
    expect(t).toEqual({ '200': t['200'], '429 rate_limit_exceeded': 16 - t['200']! });
    const refused = answers.find((x) => x.status === 429)!;
    expect(refused.headers['x-svc-ratelimit-limit']).toBe('5');
  });
});
