import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexDueDocuments } from '../../../src/jobs/rag-indexing/worker.ts';
import { VerticalWorker } from '../../../src/jobs/vertical-work/worker.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../../helpers/app.ts';
import { DIFF, FILES } from '../../dev/support.ts';
import { launchBrowser, screenshot, hasText, signInWithKey } from './browser.ts';

// The Dev vertical in the console (issue 21): a repository indexed from posted files, and a completed review with its
// line comments, over GraphQL with the key the user signs in with.

let t: TestApp;
let base: string;
let browser: Browser;
let operator: Client;

beforeAll(async () => {
  t = await buildTestApp();
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  operator = client(t.app);
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

const signIn = (secret: string) => signInWithKey(browser, base, secret);

describe('the Dev vertical in the admin console', () => {
  it('shows a repository indexed from its files, and a completed review with its line comments', async () => {
    const p = await seedProject(operator, { scopes: ['dev:write', 'inference:write'], name: 'Dev E2E' });
    const api = client(t.app, p.secret);
    const repo = (await api.post('/v1/dev/repositories', { name: 'acme/shop', git_host: 'github', default_branch: 'main' })).body;
    const pending = (await api.post('/v1/dev/repositories', { name: 'acme/empty', git_host: 'gitlab' })).body;
    await api.post(`/v1/dev/repositories/${repo.id}/files`, { files: FILES });
    await indexDueDocuments(t.deps, { leaseMs: 60_000 });
    const review = (await api.post('/v1/dev/reviews', { repository_id: repo.id, diff: DIFF, title: 'Refund zero totals', post_comments: true })).body;
    await new VerticalWorker(t.deps).runDue();
    const done = (await api.get(`/v1/dev/reviews/${review.id}`)).body;
    expect(done.status).toBe('completed');
    expect(done.comments.length).toBeGreaterThan(0);

    const page = await signIn(p.secret);
    await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Dev' }).click();
    const repoRow = page.locator(`tr[data-repository-id="${repo.id}"]`);
    await hasText(repoRow, 'acme/shop');
    expect(await repoRow.locator('td.repo-status').textContent()).toBe('ready');
    expect(await repoRow.locator('td.repo-files').textContent()).toBe('3 of 3 indexed');
    expect(await page.locator(`tr[data-repository-id="${pending.id}"] td.repo-status`).textContent()).toBe('indexing');
    const reviewRow = page.locator(`tr[data-review-id="${review.id}"]`);
    await hasText(reviewRow, 'completed');
    await screenshot(page, 'dev-01-repositories');

    await reviewRow.getByRole('link', { name: 'Refund zero totals' }).click();
    const facts = page.getByRole('region', { name: 'Review Refund zero totals' });
    await hasText(facts.locator('dd'), 'acme/shop');
    await hasText(page.locator('.review-summary'), done.summary);
    const comments = page.getByRole('table', { name: 'Line comments' }).locator('tbody tr');
    await comments.first().waitFor();
    expect(await comments.count()).toBe(done.comments.length);
    const cells = await comments.first().locator('td').allTextContents();
    expect(cells).toEqual([done.comments[0].path, String(done.comments[0].line), done.comments[0].severity, done.comments[0].body]);
    await screenshot(page, 'dev-02-review');
    await page.close();
  });
});
