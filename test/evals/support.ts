import { expect } from 'vitest';
import { EvalRunner } from '../../src/jobs/eval-runner/runner.ts';
import { seedProject, type Client, type TestApp } from '../helpers/app.ts';

export const EVAL_SCOPES = ['evals:write', 'inference:write', 'usage:read', 'keys:manage', 'governance:manage'];

/** A project and a key that may run evaluations (and infer, read usage, manage webhooks). */
export const evalProject = (operator: Client, opts: Parameters<typeof seedProject>[1] = {}) =>
  seedProject(operator, { scopes: EVAL_SCOPES, ...opts });

/** The worker, over the test app's deps, whose 429 waits move the injected clock instead of sleeping. */
export function testRunner(t: TestApp, waits: number[] = []): EvalRunner {
  return new EvalRunner(t.deps, {
    sleep: async (ms) => {
      waits.push(ms);
      t.clock.advance(ms);
    },
  });
}

/** Every result of a run, walking the pages. */
export async function allResults(api: Client, evalId: string): Promise<any[]> {
  const out: any[] = [];
  let after: string | undefined;
  for (;;) {
    const res = await api.get(`/v1/evals/${evalId}/results`, { query: { limit: 100, ...(after ? { starting_after: after } : {}) } });
    expect(res.status, res.raw).toBe(200);
    out.push(...res.body.data);
    if (!res.body.has_more) return out;
    after = res.body.data.at(-1).id;
  }
}

export const userCase = (text: string, assert: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  messages: [{ role: 'user', content: text }],
  assert,
  ...extra,
});
