import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { gqlClient, type Gql } from '../graphql/gql.ts';
import { verticalProject } from './support.ts';

// The same action through REST and GraphQL: the same stored row, audit entry and event (STYLE: a parity test per action).

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

async function trail(projectId: string, targetId: string) {
  const audit = await t.deps.db.auditEvent.findMany({ where: { projectId, targetId }, orderBy: { id: 'asc' } });
  const events = await t.deps.db.event.findMany({ where: { projectId }, orderBy: { id: 'asc' } });
  return {
    audit: audit.map((a) => ({ action: a.action, actor: a.actorKeyId, data: a.data })),
    events: events.filter((e) => JSON.stringify(e.data).includes(targetId)).map((e) => ({ type: e.type, data: e.data })),
  };
}

const withoutIds = (trailOf: Awaited<ReturnType<typeof trail>>, id: string) => JSON.parse(JSON.stringify(trailOf).replaceAll(id, 'ID'));

describe('REST and GraphQL parity', () => {
  it('create and close a Risk case: the same row, audit and risk.case.closed', async () => {
    const p = await verticalProject(operator, ['risk:write']);
    const api = client(t.app, p.secret);
    const body = { title: 'Parity', assignee: 'ann', reviewer: 'ben' };
    const viaRest = (await api.post('/v1/risk/cases', body)).body.id as string;
    await api.post(`/v1/risk/cases/${viaRest}/close`, { disposition: 'avoided' });
    const created = await gql('mutation($i: CreateRiskCaseInput!) { createRiskCase(input: $i) { id } }', { i: body }, { key: p.secret });
    const viaGql = created.body.data.createRiskCase.id as string;
    await gql('mutation($id: ID!) { closeRiskCase(id: $id, disposition: "avoided") { id } }', { id: viaGql }, { key: p.secret });
    const row = async (id: string) => {
      const { id: _id, createdAt: _c, updatedAt: _u, closedAt, ...rest } = (await t.deps.db.riskCase.findUniqueOrThrow({ where: { id } }));
      return { ...rest, closed: closedAt !== null };
    };
    expect(await row(viaGql)).toEqual(await row(viaRest));
    const a = withoutIds(await trail(p.projectId, viaRest), viaRest);
    expect(a.audit.map((x: { action: string }) => x.action)).toEqual(['risk_case.create', 'risk_case.close']);
    expect(a.events.map((x: { type: string }) => x.type)).toEqual(['risk.case.closed']);
    expect(withoutIds(await trail(p.projectId, viaGql), viaGql)).toEqual(a);
  });

  it('open and close an Ops incident: the same row, timeline, audit and events', async () => {
    const p = await verticalProject(operator, ['ops:write']);
    const api = client(t.app, p.secret);
    const viaRest = (await api.post('/v1/ops/incidents', { title: 'Parity', severity: 'sev3', service: 'api' })).body.id as string;
    await api.post(`/v1/ops/incidents/${viaRest}/close`, { resolution: 'fixed' });
    const opened = await gql('mutation { openIncident(input: { title: "Parity", severity: "sev3", service: "api" }) { id } }', {}, { key: p.secret });
    const viaGql = opened.body.data.openIncident.id as string;
    await gql('mutation($id: ID!) { closeIncident(id: $id, resolution: "fixed") { id } }', { id: viaGql }, { key: p.secret });
    const row = async (id: string) => {
      const { id: _id, createdAt: _c, updatedAt: _u, openedAt: _o, closedAt: _cl, ...rest } = await t.deps.db.opsIncident.findUniqueOrThrow({ where: { id } });
      const timeline = await t.deps.db.opsTimelineEntry.findMany({ where: { incidentId: id }, orderBy: { id: 'asc' } });
      return { ...rest, timeline: timeline.map((e) => [e.kind, e.message, e.actor]) };
    };
    expect(await row(viaGql)).toEqual(await row(viaRest));
    const a = withoutIds(await trail(p.projectId, viaRest), viaRest);
    expect(a.events.map((x: { type: string }) => x.type)).toEqual(['ops.incident.opened', 'ops.incident.closed']);
    expect(withoutIds(await trail(p.projectId, viaGql), viaGql)).toEqual(a);
  });
});
