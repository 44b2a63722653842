import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { allResults, evalProject, testRunner, userCase } from './support.ts';

let t: TestApp;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp();
  operator = client(t.app);
});
afterAll(async () => t?.close());

describe('assertions (the built-in mock echoes the last user message)', () => {
  it('judges exact, contains, regex, json_schema and llm_judge, and sums the summary', async () => {
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const created = await api.post('/v1/evals', {
      project_id: s.projectId,
      name: 'every assertion',
      model: 'mock-1',
      cases: [
        userCase('Paris', { type: 'exact' }, { id: 'exact-pass', expected: 'Paris' }),
        userCase('Paris!', { type: 'exact', value: 'Paris' }, { id: 'exact-fail' }),
        userCase('The capital is Paris.', { type: 'contains', value: 'Paris' }, { id: 'contains-pass' }),
        userCase('The capital is Lyon.', { type: 'contains' }, { id: 'contains-fail', expected: 'Paris' }),
        userCase('order 12345 shipped', { type: 'regex', value: '^order \\d{5} shipped$' }, { id: 'regex-pass' }),
        userCase('order abc shipped', { type: 'regex', value: '^order \\d{5}' }, { id: 'regex-fail' }),
        userCase('{"name":"Ada","age":36}', { type: 'json_schema', schema: { type: 'object', required: ['name', 'age'], properties: { age: { type: 'integer' } } } }, { id: 'schema-pass' }),
        userCase('{"name":"Ada"}', { type: 'json_schema', schema: { type: 'object', required: ['age'] } }, { id: 'schema-fail' }),
        userCase('not json', { type: 'json_schema', schema: { type: 'object' } }, { id: 'schema-notjson' }),
        userCase('It is Paris, of course.', { type: 'llm_judge', judge_model: 'mock-1', rubric: 'Names the capital of France.' }, { id: 'judge-pass', expected: 'paris' }),
        userCase('It is Rome.', { type: 'llm_judge', judge_model: 'mock-1', rubric: 'Names the capital of France.' }, { id: 'judge-fail', expected: 'Paris' }),
      ],
    });
    expect(created.status, created.raw).toBe(200);
    expect(created.body).toMatchObject({
      object: 'svc.eval_run',
      project_id: s.projectId,
      name: 'every assertion',
      model: 'mock-1',
      status: 'queued',
      summary: { total: 11, passed: 0, failed: 0, errored: 0, pass_rate: 0, cost_usd: 0, latency_p50_ms: null },
      completed_at: null,
    });
    expect(created.body.id).toMatch(/^evr_/);

    expect(await testRunner(t).runPending()).toBe(1);

    const run = await api.get(`/v1/evals/${created.body.id}`);
    expect(run.status, run.raw).toBe(200);
    expect(run.body).toMatchObject({ status: 'completed', summary: { total: 11, passed: 5, failed: 6, errored: 0 } });
    expect(run.body.summary.pass_rate).toBeCloseTo(5 / 11, 4);
    expect(run.body.completed_at).toEqual(expect.any(Number));
    expect(run.body.summary.latency_p50_ms).toEqual(expect.any(Number));

    const results = await allResults(api, created.body.id);
    const byId = Object.fromEntries(results.map((r) => [r.case_id, r]));
    expect(results.map((r) => r.case_id)).toEqual([
      'exact-pass', 'exact-fail', 'contains-pass', 'contains-fail', 'regex-pass', 'regex-fail',
      'schema-pass', 'schema-fail', 'schema-notjson', 'judge-pass', 'judge-fail',
    ]);
    const verdicts = Object.fromEntries(results.map((r) => [r.case_id, r.passed]));
    expect(verdicts).toEqual({
      'exact-pass': true, 'exact-fail': false, 'contains-pass': true, 'contains-fail': false, 'regex-pass': true, 'regex-fail': false,
      'schema-pass': true, 'schema-fail': false, 'schema-notjson': false, 'judge-pass': true, 'judge-fail': false,
    });
    expect(byId['exact-pass']).toMatchObject({ object: 'svc.eval_result', eval_id: created.body.id, status: 'passed', output: 'Paris', cost_usd: 0 });
    expect(byId['exact-pass'].tokens.total_tokens).toBeGreaterThan(0);
    expect(byId['exact-pass'].latency_ms).toEqual(expect.any(Number));
    expect(byId['schema-fail'].reason).toMatch(/age/);
    expect(byId['schema-notjson'].reason).toBe('The output is not JSON.');
    expect(byId['judge-pass'].reason).toMatch(/^judge: /);
    // The judge call is a second inference: its tokens are the case's too.
    expect(byId['judge-pass'].tokens.total_tokens).toBeGreaterThan(byId['exact-pass'].tokens.total_tokens);
  });

  it('refuses a bad assertion with its param: regex too long, a backreference, invalid, a schema that is not one, llm_judge without rubric', async () => {
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const base = { project_id: s.projectId, name: 'bad', model: 'mock-1' };
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ type: 'regex', value: 'a'.repeat(501) }, 'cases[0].assert.value', /at most 500/],
      [{ type: 'regex', value: '(a)\\1' }, 'cases[0].assert.value', /backreferences/],
      [{ type: 'regex', value: '(' }, 'cases[0].assert.value', /not a valid regular expression/],
      [{ type: 'json_schema', schema: { type: 'nonsense' } }, 'cases[0].assert.schema', /not a valid JSON Schema/],
      [{ type: 'json_schema' }, 'cases[0].assert.schema', /needs assert.schema/],
      [{ type: 'llm_judge', judge_model: 'mock-1' }, 'cases[0].assert.rubric', /rubric/],
      [{ type: 'llm_judge', judge_model: 'nope-9', rubric: 'x' }, 'cases[0].assert.judge_model', /Unknown model/],
      [{ type: 'exact' }, 'cases[0].assert.value', /expected/],
      [{ type: 'fuzzy' }, 'cases[0].assert.type', /must be one of/],
    ];
    for (const [assert, param, message] of cases) {
      const res = await api.post('/v1/evals', { ...base, cases: [userCase('x', assert)] });
      expect({ status: res.status, code: res.body?.error?.code, param: res.body?.error?.param }, res.raw).toEqual({ status: 400, code: 'invalid_request', param });
      expect(res.body.error.message).toMatch(message);
    }
  });

  it('tests a regex against the first 20,000 characters of the output only', async () => {
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const long = `${'x'.repeat(20_000)}END`;
    const created = await api.post('/v1/evals', { project_id: s.projectId, name: 'cap', model: 'mock-1', cases: [userCase(long, { type: 'regex', value: 'END$' })] });
    expect(created.status, created.raw).toBe(200);
    await testRunner(t).runPending();
    const [r] = await allResults(api, created.body.id);
    expect(r).toMatchObject({ status: 'failed', passed: false });
  });

  it('keeps no output for a zero-retention project (CONTRACT §12), but still judges every case', async () => {
    const s = await evalProject(operator);
    const api = client(t.app, s.secret);
    const zero = await operator.put(`/v1/projects/${s.projectId}/retention`, { mode: 'zero' });
    expect(zero.status, zero.raw).toBe(200);
    const created = await api.post('/v1/evals', {
      project_id: s.projectId,
      name: 'zero',
      model: 'mock-1',
      cases: [
        userCase('secret-marker-1 Paris', { type: 'contains', value: 'Paris' }),
        userCase('secret-marker-2 Rome', { type: 'llm_judge', judge_model: 'mock-1', rubric: 'Names Paris.' }, { expected: 'Paris' }),
      ],
    });
    expect(created.status, created.raw).toBe(200);
    await testRunner(t).runPending();
    const results = await allResults(api, created.body.id);
    expect(results.map((r) => [r.status, r.output])).toEqual([['passed', null], ['failed', null]]);
    expect(JSON.stringify(results)).not.toContain('secret-marker');
  });
});
