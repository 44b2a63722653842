import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECTS_CHANGED } from '../../src/domain/projects/cache.ts';
import { buildTestApp, client, createTestDatabase, seedProject, type Client, type TestApp, type TestDatabase } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { uniqueName } from '../helpers/services.ts';
import { expectGqlError, gqlClient } from '../graphql/gql.ts';
import { expectQueued, governedProject } from './support.ts';

// Two replicas on one database (and one Redis prefix when REDIS_URL is set): the pin set through one is honoured by
// the other's next inference (its project cache is evicted over the bus), and two approvers, one on each, race.

let db: TestDatabase;
let a: TestApp;
let b: TestApp;
let opA: Client;
let opB: Client;

beforeAll(async () => {
  db = await createTestDatabase();
  const redisPrefix = `${uniqueName('gov')}:`;
  a = await buildTestApp({ database: db, redisPrefix });
  b = await buildTestApp({ database: db, redisPrefix, clock: a.clock });
  opA = client(a.app);
  opB = client(b.app);
  // After the project cache's own handler (subscribed first): counts the changes b has heard of, per project.
  b.deps.bus.subscribe(PROJECTS_CHANGED, (projectId) => {
    heardOnB.set(projectId, (heardOnB.get(projectId) ?? 0) + 1);
    for (const wake of waitingOnB.splice(0)) wake();
  });
}, 180_000);

const heardOnB = new Map<string, number>();
const waitingOnB: (() => void)[] = [];
/**
 * Until replica b has heard of `changes` changes to the project over the bus. Redis pub/sub reaches the other
 * replica asynchronously (within milliseconds: test/inference/hot-path.test.ts measures it), and in this one test
 * process b's next request could otherwise be served before its subscriber's message is read.
 */
async function reachedB(projectId: string, changes: number): Promise<void> {
  while ((heardOnB.get(projectId) ?? 0) < changes) await new Promise<void>((wake) => waitingOnB.push(wake));
}
afterAll(async () => {
  await a.close();
  await b.close();
  await db.drop();
});

const infer = (api: Client, projectId: string, region?: string) =>
  api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: [{ role: 'user', content: 'hi' }], ...(region ? { region } : {}) });

describe('residency', () => {
  it('pins and unpins; the other replica routes by the pin once the change reaches it over the bus', async () => {
    const { projectId, secret } = await seedProject(opA);
    // The other replica has the project cached (unpinned) before the change.
    expect((await infer(client(b.app, secret), projectId)).status).toBe(200);

    const pinned = await opA.put(`/v1/projects/${projectId}/residency`, { region: 'eu-west-1' });
    expect(pinned.status, pinned.raw).toBe(200);
    expect(pinned.body).toEqual({ object: 'svc.residency', project_id: projectId, region: 'eu-west-1' });
    await reachedB(projectId, 1);
    expect((await opB.get(`/v1/projects/${projectId}`)).body.region).toBe('eu-west-1');
    // The built-in mock serves region "local": nothing is left in eu-west-1.
    expectError(await infer(client(b.app, secret), projectId), 503, 'model_unavailable');
    expectError(await infer(client(b.app, secret), projectId, 'us-east-1'), 403, 'residency_violation', 'region');

    const unpinned = await opA.put(`/v1/projects/${projectId}/residency`, { region: null });
    expect(unpinned.body.region).toBeNull();
    await reachedB(projectId, 2);
    expect((await infer(client(b.app, secret), projectId)).status).toBe(200);

    const events = await a.deps.db.event.findMany({ where: { projectId, type: 'policy.updated' }, orderBy: { id: 'asc' } });
    expect(events.map((e) => e.data)).toEqual([
      { policy: 'residency', region: 'eu-west-1' },
      { policy: 'residency', region: null },
    ]);
    const audit = await opA.get('/v1/audit/events', { query: { project_id: projectId, action: 'residency.update' } });
    expect(audit.body.data.map((e: any) => e.data)).toEqual([
      { region: null, previous: 'eu-west-1' },
      { region: 'eu-west-1', previous: null },
    ]);
  });

  it('refuses a region that is not a region name, and a missing one, on REST and GraphQL', async () => {
    const { projectId } = await seedProject(opA);
    expectError(await opA.put(`/v1/projects/${projectId}/residency`, { region: 'EU West' }), 400, 'invalid_request', 'region');
    expectError(await opA.put(`/v1/projects/${projectId}/residency`, {}), 400, 'invalid_request', 'region');
    expectError(await opA.put(`/v1/projects/prj_00000000000000000000000000/residency`, { region: null }), 404, 'not_found');
    const gql = gqlClient(a.app);
    expectGqlError(await gql('mutation($p: ID!) { setResidency(projectId: $p) { region } }', { p: projectId }), 'invalid_request', { param: 'region' });
    expectGqlError(await gql('mutation($p: ID!) { setResidency(projectId: $p, region: "x y") { region } }', { p: projectId }), 'invalid_request', { param: 'region' });
  });
});

describe('two approvers on two replicas', () => {
  it('lets exactly one approval win', async () => {
    for (let round = 0; round < 3; round++) {
      const g = await governedProject(opA, ['budget']);
      const other = await opA.post('/v1/keys', { project_id: g.projectId, name: uniqueName('b'), scopes: ['risk:approve'] });
      const id = expectQueued(await client(a.app, g.requester.secret).put(`/v1/projects/${g.projectId}/budget`, { budget_usd: 10 + round }));
      const [x, y] = await Promise.all([
        client(a.app, g.approver.secret).post(`/v1/approvals/${id}/approve`),
        client(b.app, other.body.secret).post(`/v1/approvals/${id}/approve`),
      ]);
      expect([x.status, y.status].sort(), `${x.raw} ${y.raw}`).toEqual([200, 400]);
      const winner = x.status === 200 ? x : y;
      expect(winner.body.status).toBe('approved');
      const approved = await a.deps.db.event.count({ where: { projectId: g.projectId, type: 'approval.approved' } });
      const changed = await a.deps.db.auditEvent.count({ where: { projectId: g.projectId, action: 'policy.updated' } });
      expect({ approved, changed }).toEqual({ approved: 1, changed: 1 });
    }
  });
});
