/**
 * Issue 36, templates and caller-supplied patterns: a Mustache section bomb (cost n^k), and ReDoS through an eval
 * `regex` assertion and a `response_format` JSON Schema `pattern`. Each hostile request runs while /healthz is probed:
 * the gateway keeps answering within 500 ms, and the hostile request gets its verdict (400, failed, 422) quickly.
 */
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { expectError } from '../helpers/expect.ts';
import { uniqueName } from '../helpers/services.ts';
import { expectGqlError, gqlClient, type Gql } from '../graphql/gql.ts';
import { allResults, testRunner, userCase } from '../evals/support.ts';

let t: TestApp;
let api: Client;
let gql: Gql;
let projectId: string;

beforeAll(async () => {
  t = await buildTestApp();
  const seeded = await seedProject(client(t.app), {
    plan: 'growth',
    scopes: ['templates:manage', 'inference:write', 'evals:write', 'usage:read'],
  });
  projectId = seeded.projectId;
  api = client(t.app, seeded.secret);
  gql = gqlClient(t.app, seeded.secret);
  // Warm-up, so that the latencies below are the hostile inputs' and not a first run's (module loading, JIT): one
  // eval run, one structured-output inference and one render, all harmless.
  const warm = await api.post('/v1/evals', { project_id: projectId, name: 'warm-up', model: 'mock-1', cases: [userCase('x', { type: 'regex', value: 'x' })] });
  expect(warm.status, warm.raw).toBe(200);
  await testRunner(t).runPending();
  const schema = { type: 'object', properties: { v: { type: 'string', pattern: '^v$' } }, required: ['v'] };
  await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_schema', json_schema: { name: 'w', schema } } });
});
afterAll(async () => {
  await t?.close();
});

const healthz = () => t.app.inject({ method: 'GET', url: '/healthz' });

/**
 * Runs `hostile` and probes /healthz back to back until it settles (every 10 ms): app.inject shares the event loop, so
 * a loop blocked by the hostile request shows in the slowest probe's wall time.
 */
async function whileRunning<T>(hostile: () => Promise<T>) {
  let settled = false;
  const started = performance.now();
  const running = hostile().finally(() => (settled = true));
  const latencies: number[] = [];
  do {
    const s = performance.now();
    await new Promise((r) => setTimeout(r, 10));
    const res = await healthz();
    expect(res.statusCode).toBe(200);
    latencies.push(performance.now() - s - 10);
  } while (!settled);
  const result = await running;
  return { result, maxLatencyMs: Math.max(...latencies), elapsedMs: performance.now() - started };
}

const report = (what: string, figures: Record<string, number>) =>
  console.info(`[templates-and-patterns] ${what}: ${Object.entries(figures).map(([k, v]) => `${k}=${Math.round(v)}`).join(' ')}`);

const nested = (depth: number, inner = 'x') => `${'{{#a}}'.repeat(depth)}${inner}${'{{/a}}'.repeat(depth)}`;
const thirty = Array.from({ length: 30 }, (_, i) => i);

async function createTemplate(content: string, variables: Record<string, unknown>[] = [{ name: 'a' }]) {
  const res = await api.post('/v1/templates', { project_id: projectId, name: uniqueName('tpl'), model: 'mock-1', messages: [{ role: 'user', content }], variables });
  expect(res.status, res.raw).toBe(200);
  return res.body.id as string;
}

/** A version stored before the nesting bound existed (written straight to the table), as the latest version. */
async function storeLegacyVersion(templateId: string, content: string): Promise<void> {
  await t.deps.db.templateVersion.create({
    data: { templateId, version: 2, messages: [{ role: 'user', content }], variables: [{ name: 'a', required: true }], model: 'mock-1', createdAt: new Date() },
  });
  await t.deps.db.template.update({ where: { id: templateId }, data: { latestVersion: 2 } });
}

const RENDER = `mutation($id: ID!, $variables: JSON) { renderTemplate(templateId: $id, variables: $variables) { messages { content } } }`;

describe('Mustache section bomb', () => {
  it('refuses sections nested deeper than 4 when a template is created or a version published (REST and GraphQL)', async () => {
    const five = nested(5);
    expectError(await api.post('/v1/templates', { project_id: projectId, name: uniqueName('deep'), messages: [{ role: 'user', content: five }], variables: [{ name: 'a' }] }), 400, 'invalid_request', 'messages');
    const inverted = `{{^a}}${nested(4)}{{/a}}`;
    const res = await api.post('/v1/templates', { project_id: projectId, name: uniqueName('deep'), messages: [{ role: 'system', content: 'ok' }, { role: 'user', content: inverted }], variables: [{ name: 'a' }] });
    expectError(res, 400, 'invalid_request', 'messages');
    expect(res.body.error.message).toMatch(/messages\[1\]\.content nests sections .* 5 deep; at most 4/);

    const id = await createTemplate(nested(4));
    expectError(await api.post(`/v1/templates/${id}/versions`, { messages: [{ role: 'user', content: five }], variables: [{ name: 'a' }] }), 400, 'invalid_request', 'messages');

    const created = await gql(`mutation($input: CreateTemplateInput!) { createTemplate(input: $input) { id } }`, {
      input: { name: uniqueName('gql'), messages: [{ role: 'user', content: five }], variables: [{ name: 'a' }] },
    });
    expectGqlError(created, 'invalid_request', { param: 'messages', httpStatus: 400 });
    const published = await gql(`mutation($id: ID!, $input: PublishTemplateVersionInput!) { publishTemplateVersion(templateId: $id, input: $input) { version } }`, {
      id,
      input: { messages: [{ role: 'user', content: five }], variables: [{ name: 'a' }] },
    });
    expectGqlError(published, 'invalid_request', { param: 'messages', httpStatus: 400 });
    // Nothing was published.
    expect((await api.get(`/v1/templates/${id}`)).body.latest_version).toBe(1);
  });

  it('bounds a version stored before the depth bound at render time: 400 quickly, /healthz fast meanwhile', async () => {
    const id = await createTemplate('{{#a}}{{.}}{{/a}}');
    await storeLegacyVersion(id, nested(5));
    const { result, maxLatencyMs, elapsedMs } = await whileRunning(() => api.post(`/v1/templates/${id}/render`, { variables: { a: thirty } }));
    report('legacy 5-deep bomb over 30 items, REST render', { elapsedMs, maxLatencyMs });
    expectError(result, 400, 'invalid_request', 'variables');
    expect(result.body.error.message).toMatch(/more than 10000 section iterations/);
    expect(maxLatencyMs).toBeLessThan(500);

    const inferred = await whileRunning(() => api.post('/v1/inference', { project_id: projectId, template: { id, variables: { a: thirty } } }));
    report('legacy 5-deep bomb over 30 items, inference', { elapsedMs: inferred.elapsedMs, maxLatencyMs: inferred.maxLatencyMs });
    expectError(inferred.result, 400, 'invalid_request', 'template.variables');
    expect(inferred.maxLatencyMs).toBeLessThan(500);

    const viaGql = await whileRunning(() => gql(RENDER, { id, variables: { a: thirty } }));
    expectGqlError(viaGql.result, 'invalid_request', { param: 'variables', httpStatus: 400, path: ['renderTemplate'] });
    expect(viaGql.maxLatencyMs).toBeLessThan(500);
  });

  it('caps section iterations, tags rendered and output size of an allowed template (REST render, inference, GraphQL)', async () => {
    // 3 deep over 30 items: 27,000 renders of the innermost section, within the depth bound but past 10,000.
    const cube = await createTemplate(nested(3));
    const iterations = await api.post(`/v1/templates/${cube}/render`, { variables: { a: thirty } });
    expectError(iterations, 400, 'invalid_request', 'variables');
    expect(iterations.body.error.message).toMatch(/more than 10000 section iterations/);
    expectError(await api.post('/v1/inference', { project_id: projectId, template: { id: cube, variables: { a: thirty } } }), 400, 'invalid_request', 'template.variables');
    expectGqlError(await gql(RENDER, { id: cube, variables: { a: thirty } }), 'invalid_request', { param: 'variables', httpStatus: 400 });
    // Within the bound it renders as before: 2 deep over 30 items is 930 section renders.
    const square = await createTemplate(nested(2));
    const ok = await api.post(`/v1/templates/${square}/render`, { variables: { a: thirty } });
    expect(ok.status, ok.raw).toBe(200);
    expect(ok.body.messages[0].content).toBe('x'.repeat(900));

    // 5,000 items × 100 tags: within the iterations, past 250,000 tags rendered.
    const wide = await createTemplate(`{{#a}}${'{{x}}'.repeat(100)}{{/a}}`, [{ name: 'a' }, { name: 'x' }]);
    const tags = await api.post(`/v1/templates/${wide}/render`, { variables: { a: Array(5_000).fill(1), x: '' } });
    expectError(tags, 400, 'invalid_request', 'variables');
    expect(tags.body.error.message).toMatch(/more than 250000 tags/);

    // 10 items × a 200,000-character value: 2,000,000 characters, past 1,000,000.
    const big = await createTemplate('{{#a}}{{x}}{{/a}}', [{ name: 'a' }, { name: 'x' }]);
    const output = await api.post(`/v1/templates/${big}/render`, { variables: { a: Array(10).fill(1), x: 'y'.repeat(200_000) } });
    expectError(output, 400, 'invalid_request', 'variables');
    expect(output.body.error.message).toMatch(/more than 1000000 characters/);
    const infer = await api.post('/v1/inference', { project_id: projectId, template: { id: big, variables: { a: Array(10).fill(1), x: 'y'.repeat(200_000) } } });
    expectError(infer, 400, 'invalid_request', 'template.variables');
  });

  it('renders a list holding null as an empty scope instead of failing with 500', async () => {
    const id = await createTemplate('{{#a}}<{{.}}{{x}}>{{/a}}', [{ name: 'a' }, { name: 'x' }]);
    const res = await api.post(`/v1/templates/${id}/render`, { variables: { a: [null, 1], x: 'X' } });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.messages[0].content).toBe('<X><1X>');
  });
});

// Long enough that JavaScript's backtracking RegExp blocks for seconds on the patterns below (2^28 paths).
const HOSTILE = `${'a'.repeat(28)}c`;

/**
 * Creates a run (`create` returns its id) and has the worker run it while /healthz is probed. On the embedded database
 * (PGlite runs its queries on this thread, resolving them as microtasks) the worker's own queries hold the event loop
 * for the whole run, 100-600 ms on a loaded machine, whatever the pattern: so a run is measured up to 3 times and the
 * best one counts. A backtracking pattern blocks every attempt for seconds.
 */
async function runProbed(create: () => Promise<string>) {
  const latencies: number[] = [];
  for (;;) {
    const id = await create();
    const { result, maxLatencyMs, elapsedMs } = await whileRunning(() => testRunner(t).runPending());
    expect(result).toBe(1);
    latencies.push(maxLatencyMs);
    if (maxLatencyMs < 500 || latencies.length === 3) return { id, maxLatencyMs, elapsedMs, latencies };
  }
}

const CREATE_EVAL = `mutation($p: ID!, $cases: JSON!) { createEvalRun(projectId: $p, name: "redos", model: "mock-1", cases: $cases) { id } }`;

describe('ReDoS in eval regex assertions', () => {
  it('judges (a|a)*b on a hostile output in linear time: failed verdict, /healthz fast meanwhile (REST and GraphQL runs)', async () => {
    const hostile = await runProbed(async () => {
      const res = await api.post('/v1/evals', { project_id: projectId, name: 'redos', model: 'mock-1', cases: [userCase(HOSTILE, { type: 'regex', value: '(a|a)*b' }, { id: 'hostile' })] });
      expect(res.status, res.raw).toBe(200);
      return res.body.id;
    });
    report('eval regex (a|a)*b on 28 a + c', { elapsedMs: hostile.elapsedMs, maxLatencyMs: hostile.maxLatencyMs, attempts: hostile.latencies.length });
    expect(hostile.maxLatencyMs).toBeLessThan(500);
    const [failed] = await allResults(api, hostile.id);
    expect(failed).toMatchObject({ case_id: 'hostile', status: 'failed', passed: false, output: HOSTILE });

    const matching = await runProbed(async () => {
      const res = await gql(CREATE_EVAL, { p: projectId, cases: [userCase(`${HOSTILE}b`, { type: 'regex', value: '(a|a)*b' }, { id: 'matching' })] });
      expect(res.body.errors, res.raw).toBeUndefined();
      return res.body.data.createEvalRun.id;
    });
    expect(matching.maxLatencyMs).toBeLessThan(500);
    const [passed] = await allResults(api, matching.id);
    expect(passed).toMatchObject({ case_id: 'matching', status: 'passed', passed: true });

    // Much longer: the first 20,000 characters are tested, still in linear time.
    const long = await runProbed(async () => {
      const res = await api.post('/v1/evals', { project_id: projectId, name: 'redos long', model: 'mock-1', cases: [userCase(`${'a'.repeat(50_000)}c`, { type: 'regex', value: '^(a+)+b' })] });
      expect(res.status, res.raw).toBe(200);
      return res.body.id;
    });
    report('eval regex ^(a+)+b on 50,000 a + c', { elapsedMs: long.elapsedMs, maxLatencyMs: long.maxLatencyMs, attempts: long.latencies.length });
    expect(long.maxLatencyMs).toBeLessThan(500);
    const [r] = await allResults(api, long.id);
    expect(r).toMatchObject({ status: 'failed', passed: false });
  });

  it('refuses a pattern RE2 cannot run (backreference, lookaround) at create time with the assertion value as param', async () => {
    for (const [value, message] of [['(a)\\1', /backreferences/], ['(?<w>a)\\k<w>', /backreferences/], ['foo(?=bar)', /lookahead and lookbehind/], ['(?<!x)y', /lookahead and lookbehind/]] as const) {
      const res = await api.post('/v1/evals', { project_id: projectId, name: 'bad', model: 'mock-1', cases: [userCase('x', { type: 'exact', value: 'x' }), userCase('x', { type: 'regex', value })] });
      expectError(res, 400, 'invalid_request', 'cases[1].assert.value');
      expect(res.body.error.message).toMatch(message);
    }
    const viaGql = await gql(CREATE_EVAL, { p: projectId, cases: [userCase('x', { type: 'regex', value: '(a)\\1' })] });
    expectGqlError(viaGql, 'invalid_request', { param: 'cases[0].assert.value', httpStatus: 400, path: ['createEvalRun'] });
    // json_schema assertions' patterns run on RE2 too.
    const schema = await api.post('/v1/evals', { project_id: projectId, name: 'bad', model: 'mock-1', cases: [userCase('x', { type: 'json_schema', schema: { type: 'string', pattern: '(a)\\1' } })] });
    expectError(schema, 400, 'invalid_request', 'cases[0].assert.schema');
    expect(schema.body.error.message).toMatch(/pattern .*backreferences/);
  });

  it('judges a json_schema assertion whose pattern is hostile in linear time', async () => {
    const run = await runProbed(async () => {
      const res = await api.post('/v1/evals', {
        project_id: projectId,
        name: 'redos schema',
        model: 'mock-1',
        cases: [userCase(JSON.stringify({ v: HOSTILE }), { type: 'json_schema', schema: { type: 'object', properties: { v: { type: 'string', pattern: '^(a+)+$' } } } })],
      });
      expect(res.status, res.raw).toBe(200);
      return res.body.id;
    });
    report('eval json_schema pattern ^(a+)+$ on 28 a + c', { elapsedMs: run.elapsedMs, maxLatencyMs: run.maxLatencyMs, attempts: run.latencies.length });
    expect(run.maxLatencyMs).toBeLessThan(500);
    const [r] = await allResults(api, run.id);
    expect(r).toMatchObject({ status: 'failed', passed: false });
    expect(r.reason).toMatch(/must match pattern/);
  });
});

describe('ReDoS in response_format JSON Schema patterns', () => {
  // The built-in mock answers JSON sampled from the schema: a string property's value is its name, padded with "x" to
  // minLength. Named 28 × "a", the answer's value is 28 × "a" + "x": hostile for ^(a+)+$.
  const key = 'a'.repeat(28);
  const format = (pattern: string) => ({
    type: 'json_schema',
    json_schema: { name: 'hostile', schema: { type: 'object', properties: { [key]: { type: 'string', minLength: 29, pattern } }, required: [key] } },
  });

  it('checks ^(a+)+$ against a hostile answer in linear time: 422 structured_output_failed after 3 attempts, /healthz fast', async () => {
    const { result, maxLatencyMs, elapsedMs } = await whileRunning(() =>
      api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: [{ role: 'user', content: 'go' }], response_format: format('^(a+)+$') }),
    );
    report('response_format pattern ^(a+)+$ on 28 a + x, 3 attempts', { elapsedMs, maxLatencyMs });
    expectError(result, 422, 'structured_output_failed');
    expect(result.body.error.message).toMatch(/after 3 attempts: \/a+ must match pattern "\^\(a\+\)\+\$"/);
    expect(maxLatencyMs).toBeLessThan(500);

    // The same pattern on a matching answer still passes.
    const ok = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: [{ role: 'user', content: 'go' }], response_format: format('^a+x$') });
    expect(ok.status, ok.raw).toBe(200);
    expect(ok.body.attempts).toBe(1);
  });

  it('refuses a pattern RE2 cannot run with 400 before any provider call', async () => {
    for (const pattern of ['^(a)\\1$', '(?=a)', '(?<=a)b']) {
      const res = await api.post('/v1/inference', { project_id: projectId, model: 'mock-1', messages: [{ role: 'user', content: 'go' }], response_format: format(pattern) });
      expectError(res, 400, 'invalid_request', 'response_format.json_schema.schema');
      expect(res.body.error.message).toMatch(/has a pattern that cannot be used/);
    }
    const props = await api.post('/v1/inference', {
      project_id: projectId,
      model: 'mock-1',
      messages: [{ role: 'user', content: 'go' }],
      response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'object', patternProperties: { '(x)\\1': { type: 'string' } } } } },
    });
    expectError(props, 400, 'invalid_request', 'response_format.json_schema.schema');
  });
});
