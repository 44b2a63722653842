import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { gqlClient, type Gql } from '../graphql/gql.ts';
import { expectError } from '../helpers/expect.ts';
import { expectGqlError } from '../graphql/gql.ts';
import { verticalProject } from '../verticals/support.ts';
import { LEGAL } from './support.ts';

// The same action through REST and GraphQL: the same stored row, answer and audit entry (STYLE: a parity test per action).

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const FIELDS = 'id projectId name client description status closedAt closedBy closeReason createdAt updatedAt';

/** REST's matter object in GraphQL's names. */
const asGraphql = (m: any) => ({
  id: m.id,
  projectId: m.project_id,
  name: m.name,
  client: m.client,
  description: m.description,
  status: m.status,
  closedAt: m.closed_at,
  closedBy: m.closed_by,
  closeReason: m.close_reason,
  createdAt: m.created_at,
  updatedAt: m.updated_at,
});

describe('REST and GraphQL parity', () => {
  it('create and get a matter: the same object, stored row and audit entry', async () => {
    const p = await verticalProject(operator, LEGAL);
    const api = client(t.app, p.secret);
    const body = { name: 'Parity matter', client: 'Acme Ltd', description: 'Supply agreement, 2026' };
    const viaRest = (await api.post('/v1/legal/matters', body)).body;
    const created = await gql(`mutation($i: CreateLegalMatterInput!) { createLegalMatter(input: $i) { ${FIELDS} } }`, { i: body }, { key: p.secret });
    const viaGql = created.body.data.createLegalMatter;

    const restGet = (await api.get(`/v1/legal/matters/${viaGql.id}`)).body;
    const gqlGet = (await gql(`query($id: ID!) { legalMatter(id: $id) { ${FIELDS} } }`, { id: viaRest.id }, { key: p.secret })).body.data.legalMatter;
    expect(asGraphql(restGet)).toEqual(viaGql);
    expect(gqlGet).toEqual(asGraphql(viaRest));
    const { id: _a, ...restShape } = asGraphql(viaRest);
    const { id: _b, createdAt: _c, updatedAt: _u, ...gqlShape } = viaGql;
    expect({ ...restShape, createdAt: 0, updatedAt: 0 }).toEqual({ ...gqlShape, createdAt: 0, updatedAt: 0 });

    const row = async (id: string) => {
      const { id: _id, createdAt: _c2, updatedAt: _u2, ...rest } = await t.deps.db.legalMatter.findUniqueOrThrow({ where: { id } });
      return rest;
    };
    expect(await row(viaGql.id)).toEqual(await row(viaRest.id));
    const audit = async (id: string) =>
      (await t.deps.db.auditEvent.findMany({ where: { projectId: p.projectId, targetId: id } })).map((a) => ({ action: a.action, actor: a.actorKeyId, data: a.data }));
    expect(await audit(viaGql.id)).toEqual(await audit(viaRest.id));
    expect((await audit(viaRest.id)).map((a) => a.action)).toEqual(['legal_matter.create']);
  });

  it('refuses the same bad input with the same param', async () => {
    const p = await verticalProject(operator, LEGAL);
    expectError(await client(t.app, p.secret).post('/v1/legal/matters', { name: '   ' }), 400, 'invalid_request', 'name');
    const bad = await gql('mutation($i: CreateLegalMatterInput!) { createLegalMatter(input: $i) { id } }', { i: { name: '   ' } }, { key: p.secret });
    expectGqlError(bad, 'invalid_request', { httpStatus: 400, param: 'name' });
  });
});
