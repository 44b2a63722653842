import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { REVIEW_PROMPT } from '../../src/domain/dev/prompts.ts';
import { diffPaths, queryTerms } from '../../src/domain/dev/work.ts';
import { client, type Client, type TestApp } from '../helpers/app.ts';
import type { MockOpenAI } from '../helpers/mock-openai.ts';
import { runVerticalWork, startWireApp, verticalProject } from '../verticals/support.ts';
import { DEV, DIFF, readyRepository } from './support.ts';

// The Dev prompts go to a provider that records what it was sent: the built-in prompts, and a project's own template
// of the same name replacing one (the review's, queued; the answer's, synchronous).

let t: TestApp;
let operator: Client;
let wire: MockOpenAI;
let close: () => Promise<void>;

beforeAll(async () => ({ t, operator, wire, close } = await startWireApp()));
afterAll(() => close());
beforeEach(() => wire.reset());

const as = (secret: string) => client(t.app, secret);

describe('the built-in Dev prompts', () => {
  it('a review sends the diff and related code of the repository, asks for the review schema and keeps the answer', async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const repo = await readyRepository(t, api);
    const review = (await api.post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF, title: 'Refund zero totals' })).body;
    expect(await runVerticalWork(t)).toEqual(['succeeded']);
    const body = wire.requests.at(-1)!.body;
    expect(body.messages[0].content).toContain('[svc:dev.review]');
    expect(body.messages[1].content).toContain('Title: Refund zero totals');
    expect(body.messages[1].content).toContain(DIFF);
    // The repository's own code about the change comes along (keyword search of its index).
    expect(body.messages[1].content).toMatch(/Related code from the repository:\n--- src\/payments\/refund\.ts \(chunk chk_/);
    expect(body.response_format).toMatchObject({ type: 'json_schema', json_schema: { name: 'dev_review', schema: REVIEW_PROMPT.schema, strict: true } });
    expect((await api.get(`/v1/dev/reviews/${review.id}`)).body.status).toBe('completed');
  });

  it('reads the changed paths and the words of a diff', () => {
    expect(diffPaths(DIFF)).toEqual(['src/payments/refund.ts']);
    expect(diffPaths('--- a/old.ts\n+++ /dev/null\n')).toEqual(['old.ts']);
    expect(queryTerms('total total fee refundAmount', ['payments']).split(' ')).toEqual(['payments', 'total', 'refundAmount']);
  });
});

describe("a project's own template replaces a built-in Dev prompt", () => {
  it('dev.review: the queued review renders the project\'s template through the pipeline, with the built-in schema', async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const repo = await readyRepository(t, api);
    const tpl = await operator.post('/v1/templates', {
      project_id: p.projectId,
      name: 'dev.review',
      messages: [{ role: 'system', content: 'House review rules. PR {{title}}:\n{{diff}}' }],
      variables: [{ name: 'title' }, { name: 'diff' }],
      params: { temperature: 0.3 },
    });
    expect(tpl.status, tpl.raw).toBe(200);
    const review = (await api.post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF, title: 'Refund zero totals' })).body;
    expect(await runVerticalWork(t)).toEqual(['succeeded']);
    const body = wire.requests.at(-1)!.body;
    expect(body.messages).toEqual([{ role: 'system', content: `House review rules. PR Refund zero totals:\n${DIFF}` }]);
    expect(body.temperature).toBe(0.3);
    expect(body.response_format.json_schema.name).toBe('dev_review');
    const done = (await api.get(`/v1/dev/reviews/${review.id}`)).body;
    expect(done.status).toBe('completed');
    expect(done.comments.length).toBeGreaterThan(0);
    await t.deps.outcomes.flush();
    const usage = await t.deps.db.usageRecord.findFirstOrThrow({ where: { projectId: p.projectId }, orderBy: { createdAt: 'desc' } });
    expect(usage).toMatchObject({ templateId: tpl.body.id, templateVersion: 1 });
  });

  it('dev.answer: a question is answered with the project\'s template (its latest version)', async () => {
    const p = await verticalProject(operator, DEV);
    const api = as(p.secret);
    const repo = await readyRepository(t, api);
    const tpl = await operator.post('/v1/templates', {
      project_id: p.projectId,
      name: 'dev.answer',
      messages: [{ role: 'system', content: 'v1' }],
    });
    await operator.post(`/v1/templates/${tpl.body.id}/versions`, {
      messages: [
        { role: 'system', content: 'Answer like a pirate. Sources:\n{{sources}}' },
        { role: 'user', content: '{{question}}' },
      ],
      variables: [{ name: 'sources' }, { name: 'question' }],
    });
    const asked = await api.post(`/v1/dev/repositories/${repo.id}/questions`, { question: 'Who keeps the fee?' });
    expect(asked.status, asked.raw).toBe(200);
    expect(asked.body).toMatchObject({ template_id: tpl.body.id, answer: 'Who keeps the fee?' });
    const body = wire.requests.at(-1)!.body;
    expect(body.messages[0].content).toMatch(/^Answer like a pirate\. Sources:\n\[1\] (README\.md|src\/payments\/refund\.ts) \(chunk chk_/);
    expect(body.messages[1]).toEqual({ role: 'user', content: 'Who keeps the fee?' });
    expect(body.response_format).toBeUndefined();
  });
});
