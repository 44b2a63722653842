import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTIONS, scopesFor as serverScopesFor, type Action } from '../../src/domain/auth/actions.ts';
import { EVENT_TYPES } from '../../src/domain/events/outbox.ts';
import { SCOPES } from '../../src/domain/keys/scopes.ts';
import { EVENT_GROUPS, SCOPE_GROUPS, groupsFor, scopesFor, type Catalog } from '../../src/admin/app/catalog.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { gqlClient, type Gql } from './gql.ts';

/**
 * The gateway's scopes, event types and actions as data (GET /v1/catalog, GraphQL `catalog`): the admin console reads
 * its pickers and which screen needs which scope from here, so the server's tables are the one source.
 */
let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const ACTION_SCOPES = Object.fromEntries(Object.keys(ACTIONS).map((a) => [a, [...serverScopesFor(a as Action)]]));
const CATALOG = `query { catalog { scopes events actions { name scopes } } }`;

describe('GET /v1/catalog', () => {
  it('answers the server tables themselves, in their order, to any valid key', async () => {
    // A project key holding one unrelated scope: reading the tables needs no particular scope.
    const { secret } = await seedProject(operator, { scopes: ['usage:read'] });
    for (const api of [operator, client(t.app, secret)]) {
      const res = await api.get('/v1/catalog');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ object: 'svc.catalog', scopes: [...SCOPES], events: [...EVENT_TYPES], actions: ACTION_SCOPES });
    }
    const body = (await operator.get('/v1/catalog')).body;
    expect(body.actions['key.create']).toEqual(['keys:manage']);
    expect(body.actions['approval.list']).toEqual(['governance:manage', 'risk:approve']);
    expect(body.actions['project.list']).toEqual([]);
    expect(body.actions['catalog.read']).toEqual([]);
  });

  it('needs a key', async () => {
    expectError(await operator.get('/v1/catalog', { key: null }), 401, 'invalid_api_key');
    expectError(await operator.get('/v1/catalog', { key: 'svc_sk_not_a_key' }), 401, 'invalid_api_key');
  });
});

describe('GraphQL catalog', () => {
  it('answers the same tables as GET /v1/catalog, to any valid key', async () => {
    const { secret } = await seedProject(operator, { scopes: ['models:read'] });
    for (const key of [undefined, secret]) {
      const res = await gql(CATALOG, {}, key ? { key } : {});
      expect(res.body.errors, res.raw).toBeUndefined();
      const catalog = res.body.data.catalog as Catalog;
      expect(catalog.scopes).toEqual([...SCOPES]);
      expect(catalog.events).toEqual([...EVENT_TYPES]);
      expect(Object.fromEntries(catalog.actions.map((a) => [a.name, a.scopes]))).toEqual(ACTION_SCOPES);
      expect(catalog.actions.map((a) => a.name)).toEqual(Object.keys(ACTIONS));
    }
  });

  it('needs a key', async () => {
    const res = await gql(CATALOG, {}, { key: null });
    expectError({ status: res.status, body: res.body, headers: res.headers } as never, 401, 'invalid_api_key');
  });
});

describe("the console's use of the catalog (src/admin/app/catalog.ts)", () => {
  let catalog: Catalog;
  beforeAll(async () => {
    catalog = (await gql(CATALOG)).body.data.catalog;
  });

  it("groups exactly the API's scopes and event types, each once, under the console's labels", () => {
    const names = (groups: { entries: { name: string }[] }[]) => groups.flatMap((g) => g.entries.map((e) => e.name)).sort();
    const scopes = groupsFor(SCOPE_GROUPS, catalog.scopes);
    const events = groupsFor(EVENT_GROUPS, catalog.events);
    expect(names(scopes)).toEqual([...SCOPES].sort());
    expect(names(events)).toEqual([...EVENT_TYPES].sort());
    expect(scopes.map((g) => g.area)).toEqual(SCOPE_GROUPS.map((g) => g.area));
    expect(events.map((g) => g.area)).toEqual(EVENT_GROUPS.map((g) => g.area));
  });

  it('shows a name the API adds under Other, and drops one the API no longer lists', () => {
    const groups = groupsFor(SCOPE_GROUPS, [...catalog.scopes.filter((s) => s !== 'audit:read'), 'new:scope']);
    expect(groups.at(-1)).toEqual({ area: 'Other', entries: [{ name: 'new:scope', description: '' }] });
    expect(groups.flatMap((g) => g.entries.map((e) => e.name))).not.toContain('audit:read');
    expect(groups.find((g) => g.area === 'Keys and audit')!.entries.map((e) => e.name)).toEqual(['keys:manage']);
  });

  it("derives a screen's scopes from its actions: any one of them, [] for any key, null for an unknown action", () => {
    expect(scopesFor(catalog, ['approval.list'])).toEqual(['governance:manage', 'risk:approve']);
    expect(scopesFor(catalog, ['privacy.read', 'inference.read'])).toEqual(['governance:manage', 'inference:read']);
    expect(scopesFor(catalog, ['eval_run.list'])).toEqual(['evals:write', 'usage:read']);
    expect(scopesFor(catalog, ['project.list'])).toEqual([]);
    expect(scopesFor(catalog, ['no_such.action'])).toBeNull();
  });
});
