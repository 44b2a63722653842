import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VerticalWorker } from '../../../src/jobs/vertical-work/worker.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../../helpers/app.ts';
import { uniqueName } from '../../helpers/services.ts';
import { launchBrowser, screenshot, hasText, signInWithKey } from './browser.ts';

// One flow per vertical (issue 21): a Risk case with its evidence hashes and a report's dual control state, and an Ops
// incident's timeline written and closed from the console.

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

describe('the verticals in the admin console', () => {
  it('Risk: a case shows its evidence hashes, and asking to approve a report shows it queued, then pending', async () => {
    const p = await seedProject(operator, { scopes: ['risk:write', 'inference:write'], name: 'Risk E2E' });
    const api = client(t.app, p.secret);
    const c = (await api.post('/v1/risk/cases', { title: 'Vendor access review', assignee: 'alice', reviewer: 'bob' })).body;
    const ev = (await api.post(`/v1/risk/cases/${c.id}/evidence`, { name: 'access.csv', content_base64: Buffer.from('user,role').toString('base64') })).body;
    const report = (await api.post(`/v1/risk/cases/${c.id}/reports`, {})).body;
    await new VerticalWorker(t.deps).runDue();

    const page = await signIn(p.secret);
    await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Risk' }).click();
    await page.getByRole('link', { name: 'Vendor access review' }).click();
    const row = page.locator(`tr[data-evidence-id="${ev.id}"]`);
    await hasText(row, 'access.csv');
    expect(await row.locator('td.sha256').textContent()).toBe(ev.sha256);
    const item = page.locator(`[data-report-id="${report.id}"]`);
    await hasText(item.locator('.approval-state'), 'not asked');
    await item.getByRole('button', { name: 'Ask for approval' }).click();
    const banner = page.getByRole('status').filter({ hasText: 'Queued for approval' });
    await banner.waitFor();
    const approvalId = (await banner.locator('code').textContent())!;
    expect(approvalId).toMatch(/^apr_/);
    await hasText(item.locator('.approval-state'), approvalId);
    await hasText(item.locator('.approval-state'), 'pending');
    await screenshot(page, 'verticals-01-risk-case');

    // Another key approves it: the case view shows the report approved.
    const approver = await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('approver'), scopes: ['risk:approve'] });
    expect((await client(t.app, approver.body.secret).post(`/v1/approvals/${approvalId}/approve`)).body.status).toBe('approved');
    await page.reload();
    await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Risk' }).click();
    await page.getByRole('link', { name: 'Vendor access review' }).click();
    await hasText(page.locator(`[data-report-id="${report.id}"] .approval-state`), approver.body.id);
    await page.close();
  });

  it('Ops: an incident timeline, a note added and the incident closed from the console', async () => {
    const p = await seedProject(operator, { scopes: ['ops:write'], name: 'Ops E2E' });
    const api = client(t.app, p.secret);
    const inc = (await api.post('/v1/ops/incidents', { title: 'API 5xx spike', severity: 'sev2', service: 'api' })).body;
    await api.post(`/v1/ops/incidents/${inc.id}/timeline`, { message: 'rolled back deploy 412' });

    const page = await signIn(p.secret);
    await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Ops' }).click();
    await page.getByRole('link', { name: 'API 5xx spike' }).click();
    const timeline = page.getByRole('list', { name: 'Timeline' });
    await hasText(timeline.locator('li[data-kind="note"]'), 'rolled back deploy 412');
    await page.getByLabel('Note').fill('error rate back to normal');
    await page.getByRole('button', { name: 'Add to timeline' }).click();
    await hasText(timeline.locator('li[data-kind="note"]'), 'error rate back to normal');
    await page.getByRole('button', { name: 'Close incident' }).click();
    await hasText(timeline.locator('li[data-kind="closed"]'), 'Closed.');
    expect(await timeline.locator('li').evaluateAll((els) => els.map((e) => e.getAttribute('data-kind')))).toEqual(['opened', 'note', 'note', 'closed']);
    await screenshot(page, 'verticals-02-ops-timeline');
    expect((await api.get(`/v1/ops/incidents/${inc.id}`)).body.status).toBe('closed');
    await page.close();
  });
});
