import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { expectHiddenFrom, expectScopeRequired } from '../helpers/security.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';
import { allResults, evalProject, testRunner, userCase } from './support.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(async () => t?.close());

const oneCase = [userCase('hi', { type: 'exact', value: 'hi' }, { id: 'c1' })];
const RUN_FIELDS = `id projectId name model status concurrency keyId error createdAt completedAt
  summary { total passed failed errored passRate costUsd latencyP50Ms }`;

describe('REST', () => {
  it('creates, lists newest first with cursors, reads, and pages the results in case order', async () => {
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await api.post('/v1/evals', { project_id: s.projectId, name: `run ${i}`, model: 'mock-1', cases: oneCase, concurrency: 2 });
      expect(res.status, res.raw).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(
        ['completed_at', 'concurrency', 'created_at', 'error', 'id', 'key_id', 'model', 'name', 'object', 'progress', 'project_id', 'status', 'summary', 'template'].sort(),
      );
      expect(res.body).toMatchObject({ concurrency: 2, key_id: s.keyId, status: 'queued' });
      ids.push(res.body.id);
    }
    const page = await api.get('/v1/evals', { query: { limit: 2 } });
    expect(page.status, page.raw).toBe(200);
    expect(page.body).toMatchObject({ object: 'list', has_more: true, url: '/v1/evals' });
    expect(page.headers['x-svc-page-limit']).toBe('2');
    expect(page.body.data.map((r: any) => r.id)).toEqual([ids[2], ids[1]]);
    const next = await api.get('/v1/evals', { query: { limit: 2, starting_after: ids[1]! } });
    expect(next.body.data.map((r: any) => r.id)).toEqual([ids[0]]);
    expect(next.body.has_more).toBe(false);
    const queued = await api.get('/v1/evals', { query: { status: 'completed' } });
    expect(queued.body.data).toEqual([]);
    expectError(await api.get('/v1/evals', { query: { limit: 101 } }), 400, 'invalid_request', 'limit');
    expectError(await api.get('/v1/evals', { query: { starting_after: 'evr_nope' } }), 400, 'invalid_request', 'starting_after');

    const many = await api.post('/v1/evals', {
      project_id: s.projectId,
      name: 'paged',
      model: 'mock-1',
      cases: Array.from({ length: 5 }, (_, i) => userCase(`t${i}`, { type: 'exact', value: `t${i}` })),
    });
    await testRunner(t).runPending();
    const first = await api.get(`/v1/evals/${many.body.id}/results`, { query: { limit: 2 } });
    expect(first.body).toMatchObject({ object: 'list', has_more: true, url: `/v1/evals/${many.body.id}/results` });
    expect(first.body.data.map((r: any) => r.case_id)).toEqual(['case_1', 'case_2']);
    const second = await api.get(`/v1/evals/${many.body.id}/results`, { query: { limit: 2, starting_after: first.body.data[1].id } });
    expect(second.body.data.map((r: any) => r.case_id)).toEqual(['case_3', 'case_4']);
    const back = await api.get(`/v1/evals/${many.body.id}/results`, { query: { limit: 2, ending_before: second.body.data[0].id } });
    expect(back.body.data.map((r: any) => r.case_id)).toEqual(['case_1', 'case_2']);
    expect(Object.keys(first.body.data[0]).sort()).toEqual(
      ['attempts', 'case_id', 'cost_usd', 'eval_id', 'finished_at', 'id', 'index', 'latency_ms', 'object', 'output', 'passed', 'reason', 'request_id', 'status', 'tokens'].sort(),
    );
    const all = await allResults(api, many.body.id);
    expect(all.every((r) => r.passed === true)).toBe(true);
  });

  it('refuses bad input with the param named', async () => {
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const base = { project_id: s.projectId, name: 'x', model: 'mock-1', cases: oneCase };
    const cases: [Record<string, unknown>, string][] = [
      [{ ...base, cases: [] }, 'cases'],
      [{ ...base, cases: Array.from({ length: 1001 }, () => oneCase[0]) }, 'cases'],
      [{ ...base, concurrency: 0 }, 'concurrency'],
      [{ ...base, concurrency: 17 }, 'concurrency'],
      [{ ...base, model: 'nope-1' }, 'model'],
      [{ ...base, name: '' }, 'name'],
      [{ project_id: s.projectId, name: 'x', cases: oneCase }, 'model'],
      [{ ...base, cases: [{ assert: { type: 'exact', value: 'a' } }] }, 'cases[0].messages'],
      [{ ...base, cases: [{ ...oneCase[0], variables: { a: 1 } }] }, 'cases[0].variables'],
      [{ ...base, cases: [oneCase[0], oneCase[0]] }, 'cases[1].id'],
      [{ ...base, cases: [{ messages: [{ role: 'user', content: 'x' }] }] }, 'cases[0].assert'],
      [{ ...base, extra: 1 }, 'extra'],
    ];
    for (const [body, param] of cases) expectError(await api.post('/v1/evals', body), 400, 'invalid_request', param);
  });

  it('runs a template: each case renders its variables through the pinned version, as inference does', async () => {
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const tpl = await operator.post('/v1/templates', {
      project_id: s.projectId,
      name: 'capital',
      model: 'mock-1',
      messages: [{ role: 'user', content: 'The capital of {{country}} is {{city}}.' }],
      variables: [{ name: 'country' }, { name: 'city' }],
    });
    expect(tpl.status, tpl.raw).toBe(200);
    const run = await api.post('/v1/evals', {
      project_id: s.projectId,
      name: 'templated',
      template: { id: tpl.body.id },
      cases: [
        { id: 'fr', variables: { country: 'France', city: 'Paris' }, assert: { type: 'contains', value: 'Paris' } },
        { id: 'it', variables: { country: 'Italy', city: 'Rome' }, assert: { type: 'exact', value: 'The capital of Italy is Rome.' } },
        { id: 'missing', variables: { country: 'Spain' }, assert: { type: 'contains', value: 'Madrid' } },
      ],
    });
    expect(run.status, run.raw).toBe(200);
    expect(run.body).toMatchObject({ model: null, template: { id: tpl.body.id, version: 1 } });
    // A version published after creation does not change the run: it was pinned to version 1.
    const v2 = await operator.post(`/v1/templates/${tpl.body.id}/versions`, { messages: [{ role: 'user', content: 'Nothing about {{country}} {{city}}' }], variables: [{ name: 'country' }, { name: 'city' }] });
    expect(v2.status, v2.raw).toBe(200);
    await testRunner(t).runPending();
    const results = await allResults(api, run.body.id);
    expect(results.map((r) => [r.case_id, r.status])).toEqual([['fr', 'passed'], ['it', 'passed'], ['missing', 'errored']]);
    expect(results[2].reason).toMatch(/^template_variable_missing/);
    // Each case's usage record names the template and its version.
    const usage = await api.get('/v1/usage', { query: { granularity: 'request', limit: 100 } });
    const record = usage.body.data.find((u: any) => u.request_id === results[0].request_id);
    expect(record).toMatchObject({ template_id: tpl.body.id, template_version: 1 });
  });

  it("refuses another project's template (404 template.id) and a version it does not have (404 template.version)", async () => {
    const a = await evalProject(operator);
    const b = await evalProject(operator);
    const tpl = await operator.post('/v1/templates', { project_id: a.projectId, name: 'x', model: 'mock-1', messages: [{ role: 'user', content: 'hi {{n}}' }], variables: [{ name: 'n' }] });
    expect(tpl.status, tpl.raw).toBe(200);
    const cases = [{ variables: { n: 1 }, assert: { type: 'contains', value: 'hi' } }];
    expectError(await client(t.app, b.secret).post('/v1/evals', { project_id: b.projectId, name: 't', template: { id: tpl.body.id }, cases }), 404, 'not_found', 'template.id');
    expectError(await client(t.app, a.secret).post('/v1/evals', { project_id: a.projectId, name: 't', template: { id: tpl.body.id, version: 9 }, cases }), 404, 'not_found', 'template.version');
  });

  it('needs evals:write to create and cancel, and evals:write or usage:read to read', async () => {
    const owner = await evalProject(operator);
    const run = await client(t.app, owner.secret).post('/v1/evals', { project_id: owner.projectId, name: 'x', model: 'mock-1', cases: oneCase });
    const reader = await operator.post('/v1/keys', { project_id: owner.projectId, name: 'reader', scopes: ['usage:read'] });
    const none = await operator.post('/v1/keys', { project_id: owner.projectId, name: 'none', scopes: ['inference:write'] });
    const readerApi = client(t.app, reader.body.secret);
    expect((await readerApi.get('/v1/evals')).status).toBe(200);
    expect((await readerApi.get(`/v1/evals/${run.body.id}`)).status).toBe(200);
    expect((await readerApi.get(`/v1/evals/${run.body.id}/results`)).status).toBe(200);
    await expectScopeRequired(readerApi, [
      { method: 'post', url: '/v1/evals', body: { project_id: owner.projectId, name: 'x', model: 'mock-1', cases: oneCase } },
      { method: 'post', url: `/v1/evals/${run.body.id}/cancel` },
    ]);
    await expectScopeRequired(client(t.app, none.body.secret), [
      { method: 'get', url: '/v1/evals' },
      { method: 'get', url: `/v1/evals/${run.body.id}` },
      { method: 'get', url: `/v1/evals/${run.body.id}/results` },
    ]);
  });

  it("isolates projects: another project's run is 404 everywhere and absent from its list", async () => {
    const a = await evalProject(operator);
    const b = await evalProject(operator);
    const run = await client(t.app, a.secret).post('/v1/evals', { project_id: a.projectId, name: 'secret', model: 'mock-1', cases: oneCase });
    const bApi = client(t.app, b.secret);
    await expectHiddenFrom(bApi, [
      { method: 'get', url: `/v1/evals/${run.body.id}` },
      { method: 'get', url: `/v1/evals/${run.body.id}/results` },
      { method: 'post', url: `/v1/evals/${run.body.id}/cancel` },
      { method: 'get', url: `/v1/evals?project_id=${a.projectId}` },
      { method: 'post', url: '/v1/evals', body: { project_id: a.projectId, name: 'x', model: 'mock-1', cases: oneCase } },
    ]);
    expect((await bApi.get('/v1/evals')).body.data.map((r: any) => r.id)).not.toContain(run.body.id);
    // The operator sees it (and may run one for a project it names).
    expect((await operator.get(`/v1/evals/${run.body.id}`)).status).toBe(200);
  });

  it('replays a create with the same Idempotency-Key instead of queuing a second run', async () => {
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const body = { project_id: s.projectId, name: 'once', model: 'mock-1', cases: oneCase };
    const first = await api.post('/v1/evals', body, { headers: { 'idempotency-key': 'eval-once' } });
    const again = await api.post('/v1/evals', body, { headers: { 'idempotency-key': 'eval-once' } });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.id).toBe(first.body.id);
    expect((await api.get('/v1/evals')).body.data.filter((r: any) => r.name === 'once')).toHaveLength(1);
  });

  it('runs an operator-created run as the operator in the project it names', async () => {
    const s = await seedProject(operator);
    const res = await operator.post('/v1/evals', { project_id: s.projectId, name: 'op', model: 'mock-1', cases: oneCase });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.key_id).toBe('key_master');
    await testRunner(t).runPending();
    expect((await operator.get(`/v1/evals/${res.body.id}`)).body).toMatchObject({ status: 'completed', summary: { passed: 1 } });
  });
});

describe('GraphQL', () => {
  it('creates, reads (with results), lists and cancels like REST', async () => {
    const s = await evalProject(operator);
    const created = await gql(
      `mutation($p: ID!, $cases: JSON!) { createEvalRun(projectId: $p, name: "g", model: "mock-1", cases: $cases, concurrency: 3) { ${RUN_FIELDS} } }`,
      { p: s.projectId, cases: [...oneCase, userCase('bye', { type: 'contains', value: 'hi' })] },
      { key: s.secret },
    );
    expect(created.body.errors, created.raw).toBeUndefined();
    const run = created.body.data.createEvalRun;
    expect(run).toMatchObject({ projectId: s.projectId, name: 'g', model: 'mock-1', status: 'queued', concurrency: 3, keyId: s.keyId, summary: { total: 2, passed: 0 } });
    const rest = await client(t.app, s.secret).get(`/v1/evals/${run.id}`);
    expect(rest.body.summary).toEqual({ total: 2, passed: 0, failed: 0, errored: 0, pass_rate: 0, cost_usd: 0, latency_p50_ms: null });

    await testRunner(t).runPending();
    const read = await gql(
      `query($id: ID!) { evalRun(id: $id) { ${RUN_FIELDS} results(first: 10) { edges { node { caseId status passed output reason totalTokens costUsd latencyMs } } pageInfo { hasNextPage } } } }`,
      { id: run.id },
      { key: s.secret },
    );
    expect(read.body.errors, read.raw).toBeUndefined();
    expect(read.body.data.evalRun).toMatchObject({ status: 'completed', summary: { total: 2, passed: 1, failed: 1, passRate: 0.5 } });
    expect(read.body.data.evalRun.results.edges.map((e: any) => [e.node.caseId, e.node.passed])).toEqual([
      ['c1', true],
      ['case_2', false],
    ]);
    const list = await gql(`query { evalRuns(first: 5) { edges { node { id } } } }`, {}, { key: s.secret });
    expect(list.body.data.evalRuns.edges.map((e: any) => e.node.id)).toContain(run.id);

    const cancel = await gql(`mutation($id: ID!) { cancelEvalRun(id: $id) { status } }`, { id: run.id }, { key: s.secret });
    expectGqlError(cancel, 'invalid_request', { param: 'eval_id', httpStatus: 400, path: ['cancelEvalRun'] });

    const queued = await gql(`mutation($p: ID!, $cases: JSON!) { createEvalRun(projectId: $p, name: "c", model: "mock-1", cases: $cases) { id } }`, { p: s.projectId, cases: oneCase }, { key: s.secret });
    const canceled = await gql(`mutation($id: ID!) { cancelEvalRun(id: $id) { status completedAt } }`, { id: queued.body.data.createEvalRun.id }, { key: s.secret });
    expect(canceled.body.data.cancelEvalRun.status).toBe('canceled');
  });

  it('refuses the same inputs with the same codes and params', async () => {
    const s = await evalProject(operator);
    const bad = await gql(
      `mutation($p: ID!, $cases: JSON!) { createEvalRun(projectId: $p, name: "b", model: "mock-1", cases: $cases) { id } }`,
      { p: s.projectId, cases: [userCase('x', { type: 'regex', value: '(?=a)' })] },
      { key: s.secret },
    );
    expectGqlError(bad, 'invalid_request', { param: 'cases[0].assert.value', httpStatus: 400, path: ['createEvalRun'] });
    const tpl = await gql(
      `mutation($p: ID!, $cases: JSON!) { createEvalRun(projectId: $p, name: "t", template: {id: "tpl_x"}, cases: $cases) { id } }`,
      { p: s.projectId, cases: [{ variables: {}, assert: { type: 'exact', value: 'a' } }] },
      { key: s.secret },
    );
    expectGqlError(tpl, 'not_found', { param: 'template.id', httpStatus: 404 });
  });

  it('checks scopes and hides other projects', async () => {
    const a = await evalProject(operator);
    const b = await evalProject(operator);
    const none = await operator.post('/v1/keys', { project_id: b.projectId, name: 'none', scopes: ['inference:write'] });
    const run = await client(t.app, a.secret).post('/v1/evals', { project_id: a.projectId, name: 'x', model: 'mock-1', cases: oneCase });
    await expectGqlScopeRequired(gql, none.body.secret, [
      { field: 'evalRuns', query: 'query { evalRuns(first: 1) { edges { node { id } } } }' },
      { field: 'evalRun', query: `query { evalRun(id: "${run.body.id}") { id } }` },
      { field: 'createEvalRun', query: `mutation($c: JSON!) { createEvalRun(name: "x", model: "mock-1", cases: $c) { id } }`, variables: { c: oneCase } },
      { field: 'cancelEvalRun', query: `mutation { cancelEvalRun(id: "${run.body.id}") { id } }` },
    ]);
    await expectGqlHiddenFrom(gql, b.secret, [
      { field: 'evalRun', query: `query { evalRun(id: "${run.body.id}") { id } }` },
      { field: 'cancelEvalRun', query: `mutation { cancelEvalRun(id: "${run.body.id}") { id } }` },
      { field: 'createEvalRun', query: `mutation($c: JSON!) { createEvalRun(projectId: "${a.projectId}", name: "x", model: "mock-1", cases: $c) { id } }`, variables: { c: oneCase } },
    ]);
  });
});
