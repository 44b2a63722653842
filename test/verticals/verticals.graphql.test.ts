import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import type { Receiver } from '../helpers/https-receiver.ts';
import { uniqueName } from '../helpers/services.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';
import { expectGqlQueued } from '../governance/support.ts';
import { webhookEnv } from '../webhooks/support.ts';
import { deliver, receiverFor, runVerticalWork, verticalProject } from './support.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;
const receivers: Receiver[] = [];

beforeAll(async () => {
  t = await buildTestApp({ env: webhookEnv() });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t.close();
});

const nowS = () => Math.floor(t.clock.now() / 1000);
const CREATE_CASE = 'mutation($input: CreateRiskCaseInput!) { createRiskCase(input: $input) { id status assignee reviewer } }';

describe('Risk on GraphQL', () => {
  it('segregation_of_duties, evidence_immutable, risk.case.closed and risk.report.approved', async () => {
    const p = await verticalProject(operator, ['risk:write', 'inference:write']);
    const key = { key: p.secret };
    const r = await receiverFor(operator, p.projectId, ['risk.case.closed', 'risk.report.approved']);
    receivers.push(r);

    const same = await gql(CREATE_CASE, { input: { title: 'x', assignee: 'dana', reviewer: 'dana' } }, key);
    expectGqlError(same, 'segregation_of_duties', { httpStatus: 409, param: 'reviewer', path: ['createRiskCase'] });
    const created = await gql(CREATE_CASE, { input: { title: 'Payments vendor', assignee: 'dana', reviewer: 'eli' } }, key);
    const caseId = created.body.data.createRiskCase.id;
    expect(caseId).toMatch(/^cas_/);
    const upd = await gql('mutation($id: ID!) { updateRiskCase(id: $id, input: { reviewer: "dana" }) { id } }', { id: caseId }, key);
    expectGqlError(upd, 'segregation_of_duties', { httpStatus: 409 });

    const ev = await gql(
      'mutation($c: ID!, $b: String!) { addRiskEvidence(caseId: $c, input: { name: "contract.pdf", contentBase64: $b }) { id sha256 size } }',
      { c: caseId, b: Buffer.from('signed').toString('base64') },
      key,
    );
    const evidence = ev.body.data.addRiskEvidence;
    expect(evidence.size).toBe(6);
    const patch = await gql('mutation($id: ID!) { updateRiskEvidence(id: $id, input: { contentBase64: "AAAA" }) { id } }', { id: evidence.id }, key);
    expectGqlError(patch, 'evidence_immutable', { httpStatus: 409, param: 'content_base64', path: ['updateRiskEvidence'] });
    const meta = await gql('mutation($id: ID!) { updateRiskEvidence(id: $id, input: { description: "final" }) { description sha256 } }', { id: evidence.id }, key);
    expect(meta.body.data.updateRiskEvidence).toEqual({ description: 'final', sha256: evidence.sha256 });

    const report = await gql('mutation($c: ID!) { requestRiskReport(caseId: $c) { id status } }', { c: caseId }, key);
    const reportId = report.body.data.requestRiskReport.id;
    await runVerticalWork(t);
    const asked = await gql('mutation($id: ID!) { approveRiskReport(id: $id) { id } }', { id: reportId }, key);
    const approvalId = expectGqlQueued(asked, 'approveRiskReport');
    const pending = await gql('query($id: ID!) { riskReport(id: $id) { status approval { id status } } }', { id: reportId }, key);
    expect(pending.body.data.riskReport).toEqual({ status: 'completed', approval: { id: approvalId, status: 'pending' } });
    const approver = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('approver'), scopes: ['risk:approve'] });
    const ok = await gql('mutation($id: ID!) { approveApproval(id: $id) { status } }', { id: approvalId }, { key: approver.body.secret });
    expect(ok.body.data.approveApproval).toEqual({ status: 'approved' });

    const closed = await gql('mutation($id: ID!) { closeRiskCase(id: $id, disposition: "accepted") { status disposition } }', { id: caseId }, key);
    expect(closed.body.data.closeRiskCase).toEqual({ status: 'closed', disposition: 'accepted' });

    const view = await gql(
      'query($id: ID!) { riskCase(id: $id) { status evidence { edges { node { sha256 } } } reports { edges { node { id status approvedBy } } } } }',
      { id: caseId },
      key,
    );
    expect(view.body.data.riskCase).toEqual({
      status: 'closed',
      evidence: { edges: [{ node: { sha256: evidence.sha256 } }] },
      reports: { edges: [{ node: { id: reportId, status: 'approved', approvedBy: approver.body.id } }] },
    });

    const events = await deliver(t, r, 2);
    expect(Object.fromEntries(events.map((e) => [e.type, e.data.case_id]))).toEqual({ 'risk.report.approved': caseId, 'risk.case.closed': caseId });
  });
});

describe('Ops on GraphQL', () => {
  it('connector_disabled, query_window_too_large, ops.incident.opened/closed and ops.slo.burn', async () => {
    const p = await verticalProject(operator, ['ops:write', 'inference:write']);
    const key = { key: p.secret };
    const r = await receiverFor(operator, p.projectId, ['ops.incident.opened', 'ops.incident.closed', 'ops.slo.burn']);
    receivers.push(r);

    const con = await gql('mutation { createConnector(input: { name: "loki", kind: "loki", enabled: false }) { id enabled } }', {}, key);
    const scan = await gql('mutation($id: ID!) { scanConnector(id: $id) { id } }', { id: con.body.data.createConnector.id }, key);
    expectGqlError(scan, 'connector_disabled', { httpStatus: 403, param: 'connector_id', path: ['scanConnector'] });

    const wide = await gql('mutation($i: QueryLogsInput!) { queryLogs(input: $i) { id } }', { i: { from: nowS() - 25 * 3600, to: nowS(), query: '' } }, key);
    expectGqlError(wide, 'query_window_too_large', { httpStatus: 409, param: 'to', path: ['queryLogs'] });
    const q = await gql('mutation($i: QueryLogsInput!) { queryLogs(input: $i) { id matched status } }', { i: { from: nowS() - 3600, to: nowS(), query: '' } }, key);
    expect(q.body.data.queryLogs).toMatchObject({ matched: 0, status: 'queued' });

    const inc = await gql('mutation { openIncident(input: { title: "Queue backlog", severity: "sev3" }) { id status } }', {}, key);
    const incidentId = inc.body.data.openIncident.id;
    await gql('mutation($id: ID!) { addTimelineEntry(incidentId: $id, message: "scaled workers") { id } }', { id: incidentId }, key);
    const closed = await gql('mutation($id: ID!) { closeIncident(id: $id, resolution: "scaled") { status } }', { id: incidentId }, key);
    expect(closed.body.data.closeIncident).toEqual({ status: 'closed' });
    const timeline = await gql('query($id: ID!) { opsIncident(id: $id) { timeline { edges { node { kind message } } } } }', { id: incidentId }, key);
    expect(timeline.body.data.opsIncident.timeline.edges.map((e: any) => e.node.kind)).toEqual(['closed', 'note', 'opened']);

    await gql('mutation { createSlo(input: { name: "q", service: "queue", objective: 0.99 }) { id } }', {}, key);
    const burn = await gql('mutation($e: JSON!) { ingestLogs(entries: $e) { ingested sloBurns } }', { e: [{ level: 'error', service: 'queue', message: 'stuck' }] }, key);
    expect(burn.body.data.ingestLogs.sloBurns).toHaveLength(1);

    const events = await deliver(t, r, 3);
    expect(events.map((e) => e.type).sort()).toEqual(['ops.incident.closed', 'ops.incident.opened', 'ops.slo.burn']);
  });
});

describe('scopes and isolation on GraphQL', () => {
  it('a key of one vertical opens nothing of another; another project looks absent', async () => {
    const risk = await verticalProject(operator, ['risk:write', 'inference:write']);
    const ops = await verticalProject(operator, ['ops:write', 'inference:write']);
    await expectGqlScopeRequired(gql, risk.secret, [
      { field: 'opsIncidents', query: '{ opsIncidents { edges { node { id } } } }' },
      { field: 'openIncident', query: 'mutation { openIncident(input: { title: "x", severity: "sev4" }) { id } }' },
    ]);
    await expectGqlScopeRequired(gql, ops.secret, [
      { field: 'riskCases', query: '{ riskCases { edges { node { id } } } }' },
      { field: 'createRiskCase', query: 'mutation { createRiskCase(input: { title: "x", assignee: "a", reviewer: "b" }) { id } }' },
    ]);
    const c = await gql(CREATE_CASE, { input: { title: 'x', assignee: 'a', reviewer: 'b' } }, { key: risk.secret });
    const other = await verticalProject(operator, ['risk:write', 'inference:write']);
    await expectGqlHiddenFrom(gql, other.secret, [
      { field: 'riskCase', query: 'query($id: ID!) { riskCase(id: $id) { id } }', variables: { id: c.body.data.createRiskCase.id } },
      { field: 'closeRiskCase', query: 'mutation($id: ID!) { closeRiskCase(id: $id, disposition: "accepted") { id } }', variables: { id: c.body.data.createRiskCase.id } },
    ]);
  });
});
