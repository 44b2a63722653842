import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectGqlError, gqlClient, type Gql } from '../graphql/gql.ts';
import { expectGqlQueued, governedProject } from '../governance/support.ts';

// The GraphQL twins of CONTRACT §11/§12: setProjectPii, setProjectRetention, Project.privacy and inference(id).

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  // The deadline is tested with an injected clock; a loaded test machine must not trip the real one.
  t = await buildTestApp({ env: { SVC_PII_TIMEOUT_MS: '10000' } });
  operator = client(t.app);
}, 120_000);
afterAll(() => t.close());

const SCOPES = ['inference:write', 'inference:read', 'governance:manage'];

async function project(scopes = SCOPES) {
  const p = await seedProject(operator, { scopes });
  return { ...p, api: client(t.app, p.secret), gql: gqlClient(t.app, p.secret) };
}

const SET_PII = 'mutation($p: ID!, $r: Boolean!) { setProjectPii(projectId: $p, redact: $r) { projectId piiRedact piiUpdatedAt } }';
const SET_RETENTION =
  'mutation($p: ID!, $m: String!, $d: Int) { setProjectRetention(projectId: $p, mode: $m, days: $d) { projectId retentionMode retentionDays } }';
const PROJECT = 'query($p: ID!) { project(id: $p) { id privacy { piiRedact retentionMode retentionDays } } }';
const INFERENCE = 'query($id: ID!) { inference(id: $id) { id projectId requestId status request model route content finishReason promptTokens completionTokens costUsd pii } }';

const infer = (api: Client, projectId: string, content: string, extra: Record<string, unknown> = {}) =>
  api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: [{ role: 'user', content }], ...extra });

describe('GraphQL privacy', () => {
  it('sets and reads the PII default and retention, as REST does', async () => {
    const { projectId, gql, api } = await project();
    const before = await gql(PROJECT, { p: projectId });
    expect(before.body.data.project.privacy).toEqual({ piiRedact: false, retentionMode: 'standard', retentionDays: 30 });
    const pii = await gql(SET_PII, { p: projectId, r: true });
    expect(pii.body.data.setProjectPii, pii.raw).toMatchObject({ projectId, piiRedact: true });
    const ret = await gql(SET_RETENTION, { p: projectId, m: 'standard', d: 7 });
    expect(ret.body.data.setProjectRetention).toEqual({ projectId, retentionMode: 'standard', retentionDays: 7 });
    expect((await api.get(`/v1/projects/${projectId}/retention`)).body).toMatchObject({ mode: 'standard', days: 7 });
    expect((await api.get(`/v1/projects/${projectId}/pii`)).body.redact).toBe(true);
    const audit = await operator.get('/v1/audit/events', { query: { project_id: projectId, action: 'retention.update' } });
    expect(audit.body.data[0].data).toEqual({ mode: 'standard', days: 7, previous: { mode: 'standard', days: 30 } });
  });

  it('refuses bad values with the REST error and param', async () => {
    const { projectId, gql } = await project();
    expectGqlError(await gql(SET_RETENTION, { p: projectId, m: 'forever' }), 'invalid_request', { param: 'mode', httpStatus: 400 });
    expectGqlError(await gql(SET_RETENTION, { p: projectId, m: 'standard', d: 400 }), 'invalid_request', { param: 'days', httpStatus: 400 });
  });

  it('reads a retained inference; record_not_retained past retention or under zero; not_found for unknown or foreign ids', async () => {
    const a = await project();
    const b = await project();
    const res = await infer(a.api, a.projectId, 'mail x@y.io', { pii: { redact: true } });
    const got = await a.gql(INFERENCE, { id: res.body.id });
    expect(got.body.data.inference, got.raw).toEqual({
      id: res.body.id,
      projectId: a.projectId,
      requestId: res.body.request_id,
      status: 'succeeded',
      request: { model: 'mock-1', messages: [{ role: 'user', content: 'mail [EMAIL_1]' }] },
      model: 'mock-1',
      route: res.body.route,
      content: 'mail [EMAIL_1]',
      finishReason: 'stop',
      promptTokens: res.body.usage.prompt_tokens,
      completionTokens: res.body.usage.completion_tokens,
      costUsd: res.body.cost_usd,
      pii: { redacted: { email: 1 } },
    });
    expectGqlError(await b.gql(INFERENCE, { id: res.body.id }), 'not_found', { param: 'inference_id', httpStatus: 404, path: ['inference'] });
    expectGqlError(await a.gql(INFERENCE, { id: 'inf_0000000000000000000000' }), 'not_found', { httpStatus: 404 });

    await a.gql(SET_RETENTION, { p: a.projectId, m: 'standard', d: 1 });
    t.clock.advanceHours(25);
    expectGqlError(await a.gql(INFERENCE, { id: res.body.id }), 'record_not_retained', { param: 'inference_id', httpStatus: 404 });

    await a.gql(SET_RETENTION, { p: a.projectId, m: 'zero' });
    const zero = await infer(a.api, a.projectId, 'nothing kept');
    expectGqlError(await a.gql(INFERENCE, { id: zero.body.id }), 'record_not_retained', { httpStatus: 404 });
  });

  it('needs inference:read for inference and governance:manage for the settings', async () => {
    const { projectId, gql, api } = await project(['inference:write']);
    const res = await infer(api, projectId, 'x');
    expectGqlError(await gql(INFERENCE, { id: res.body.id }), 'insufficient_scope', { httpStatus: 403 });
    expectGqlError(await gql(SET_PII, { p: projectId, r: true }), 'insufficient_scope', { httpStatus: 403 });
    expectGqlError(await gql(SET_RETENTION, { p: projectId, m: 'zero' }), 'insufficient_scope', { httpStatus: 403 });
  });

  it('queues both mutations under dual control', async () => {
    const g = await governedProject(operator, ['pii', 'retention']);
    const gql: Gql = gqlClient(t.app, g.requester.secret);
    expectGqlQueued(await gql(SET_PII, { p: g.projectId, r: true }), 'setProjectPii');
    expectGqlQueued(await gql(SET_RETENTION, { p: g.projectId, m: 'zero' }), 'setProjectRetention');
    expect((await operator.get(`/v1/projects/${g.projectId}/retention`)).body.mode).toBe('standard');
  });
});
