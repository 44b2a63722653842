import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../../helpers/app.ts';
import { governedProject } from '../../governance/support.ts';
import type { Governed } from '../../governance/support.ts';
import { launchBrowser, screenshot, hasText, signInWithKey } from './browser.ts';

// Dual control in the admin console (CONTRACT §15): a change to a guarded resource shows "queued for approval" instead
// of an error, and another key approves or rejects it on the Approvals screen, seeing the change as a diff.

let t: TestApp;
let base: string;
let browser: Browser;
let operator: Client;
let g: Governed;

beforeAll(async () => {
  t = await buildTestApp();
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  operator = client(t.app);
  g = await governedProject(operator, ['rate_limits']);
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

const signIn = (secret: string) => signInWithKey(browser, base, secret);

async function saveLimits(page: Page, rpm: string): Promise<void> {
  await page.getByRole('link', { name: 'Rate limits' }).click();
  const form = page.getByRole('form', { name: 'Edit rate limits' });
  await page.waitForFunction(() => (document.getElementById('limit-requestsPerMinute') as HTMLInputElement | null)?.value !== '');
  await form.getByLabel('Requests per minute', { exact: true }).fill(rpm);
  await form.getByRole('button', { name: 'Save limits' }).click();
}

describe('approvals in the admin console', () => {
  it('queues a guarded change with a banner, and another key approves it from a before/after diff', async () => {
    const requester = await signIn(g.requester.secret);
    await saveLimits(requester, '240');
    const banner = requester.getByRole('status').filter({ hasText: 'Queued for approval' });
    await banner.waitFor();
    const approvalId = (await banner.locator('code').textContent())!;
    expect(approvalId).toMatch(/^apr_/);
    expect(await requester.getByRole('alert').count()).toBe(0);
    expect(await requester.getByText('Saved: new limits apply').count()).toBe(0);
    await screenshot(requester, 'approvals-01-queued');
    // The requester sees its own change waiting, without buttons to decide it.
    await requester.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Approvals' }).click();
    const own = requester.locator(`[data-approval-id="${approvalId}"]`);
    await hasText(own, 'You requested this change');
    expect(await own.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    await requester.close();

    const approver = await signIn(g.approver.secret);
    await approver.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Approvals' }).click();
    const item = approver.locator(`[data-approval-id="${approvalId}"]`);
    await hasText(item, 'rate_limits.update');
    const row = item.locator('tr[data-field="requests_per_minute"]');
    expect(await row.getAttribute('class')).toBe('changed');
    expect(await row.locator('td.before').textContent()).toBe('60');
    expect(await row.locator('td.after').textContent()).toBe('240');
    expect(await item.locator('tr[data-field="burst"]').getAttribute('class')).toBe('');
    await screenshot(approver, 'approvals-02-diff');
    await item.getByRole('button', { name: 'Approve' }).click();
    await hasText(item, `Decided by ${g.approver.id}`);
    await hasText(item.locator('.status'), 'approved');
    expect((await operator.get(`/v1/projects/${g.projectId}/rate-limits`)).body.requests_per_minute).toBe(240);
    await approver.close();
  });

  it('lists pending changes first and rejects one with a reason; nothing is applied', async () => {
    const requester = await signIn(g.requester.secret);
    await saveLimits(requester, '99');
    await requester.getByRole('status').filter({ hasText: 'Queued for approval' }).waitFor();
    await requester.close();

    const approver = await signIn(g.approver.secret);
    await approver.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Approvals' }).click();
    const pendingCard = approver.getByRole('region', { name: 'Pending approvals' });
    const item = pendingCard.locator('article.approval').first();
    await hasText(item, 'pending');
    await item.getByLabel('Reason (optional, for a rejection)').fill('too low for the batch jobs');
    await item.getByRole('button', { name: 'Reject' }).click();
    await hasText(item, 'reason: “too low for the batch jobs”');
    await hasText(item.locator('.status'), 'rejected');
    await screenshot(approver, 'approvals-03-rejected');
    // The earlier approved change is listed under Decided.
    await hasText(approver.getByRole('region', { name: 'Decided' }), 'approved');
    expect((await operator.get(`/v1/projects/${g.projectId}/rate-limits`)).body.requests_per_minute).toBe(240);
    await approver.close();
  });
});
