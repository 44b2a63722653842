import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../../helpers/app.ts';
import { writeProvidersFile } from '../../inference/fixtures.ts';
import { hasText, launchBrowser, screenshot } from './browser.ts';
import { expectAccessible, openScreen, signIn } from './console-page.ts';

/**
 * Access → Customers in Debian's chromium: a customer named by an inference shows its spend; its budget and rate limits
 * are set in the side panel; a key that may only read sees no form. axe-core finds no serious violation.
 */
let t: TestApp;
let base: string;
let browser: Browser;
let api: Client;
let project: { projectId: string; secret: string };
let reader: string;

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [{ name: 'priced', kind: 'mock', region: 'eu-west-1', models: [{ id: 'mock-priced', input_per_mtok: 1000, output_per_mtok: 2000 }] }],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  const seeded = await seedProject(client(t.app), {
    name: 'Customers project',
    scopes: ['usage:read', 'budgets:manage', 'governance:manage', 'inference:write'],
    limits: { requests_per_minute: 10_000, tokens_per_minute: 10_000_000, burst: 0 },
  });
  project = seeded;
  api = client(t.app, seeded.secret);
  reader = (await client(t.app).post('/v1/keys', { project_id: seeded.projectId, name: 'analyst', scopes: ['usage:read'] })).body.secret;
  // Two customers named by inferences: one through `user`, one through X-Svc-Customer.
  for (const [customer, how] of [['cus_42', 'user'], ['cus_7', 'header']] as const) {
    const res = await api.post(
      '/v1/chat/completions',
      { model: 'mock-priced', messages: [{ role: 'user', content: `Hello from ${customer}` }], ...(how === 'user' ? { user: customer } : {}) },
      how === 'header' ? { headers: { 'x-svc-customer': customer } } : {},
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }
  // The spend is written after the answer: wait until the customer's month shows it.
  for (let i = 0; i < 100; i++) {
    const c = await api.get(`/v1/projects/${seeded.projectId}/customers/cus_42`);
    if (c.status === 200 && c.body.spent_usd > 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  browser = await launchBrowser();
}, 240_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('Customers', () => {
  it('lists customers with their spend and sets one budget and rate limits in the side panel', async () => {
    const page = await signIn(browser, base, project.secret);
    await openScreen(page, 'Customers');
    const row = page.locator('tr[data-customer="cus_42"]');
    await row.waitFor();
    expect(await page.locator('tr[data-customer="cus_7"]').count()).toBe(1);
    const spent = (await api.get(`/v1/projects/${project.projectId}/customers/cus_42`)).body.spent_usd as number;
    expect(spent).toBeGreaterThan(0);
    expect(await row.locator('td').nth(1).textContent()).toContain('$0.0');
    await expectAccessible(page, 'customers list');

    await page.getByRole('button', { name: 'Set bounds of cus_42' }).click();
    const panel = page.getByRole('dialog', { name: 'Bounds of cus_42' });
    await panel.waitFor();
    // Checked before it is sent: a negative budget is refused at its field.
    await panel.getByLabel('Budget (USD, empty: none)').fill('-1');
    await hasText(panel.locator('#customer-budget-error'), 'at least 0');
    expect(await panel.getByRole('button', { name: 'Save budget' }).isDisabled()).toBe(true);
    await panel.getByLabel('Budget (USD, empty: none)').fill('20');
    await panel.getByRole('button', { name: 'Save budget' }).click();
    await hasText(panel.getByRole('status'), 'Saved the budget of cus_42');
    await panel.getByLabel('Requests per minute (empty: none)').fill('30');
    await panel.getByRole('button', { name: 'Save rate limits' }).click();
    await hasText(panel.getByRole('status'), 'Saved the rate limits of cus_42');
    await expectAccessible(page, 'customer bounds panel');
    await screenshot(page, 'customers-bounds-panel');
    await page.keyboard.press('Escape');
    await panel.waitFor({ state: 'hidden' });

    await hasText(row, '$20.00');
    await hasText(row, '30');
    await hasText(row.getByRole('img'), '<1%');
    const stored = (await api.get(`/v1/projects/${project.projectId}/customers/cus_42`)).body;
    expect(stored).toMatchObject({ budget_usd: 20, hard_stop: true, rate_limits: { requests_per_minute: 30, tokens_per_minute: null } });
    await screenshot(page, 'customers');
    await page.close();
  });

  it('bounds a customer before its first request', async () => {
    const page = await signIn(browser, base, project.secret);
    await openScreen(page, 'Customers');
    await page.getByRole('button', { name: 'Bound a customer' }).click();
    const panel = page.getByRole('dialog', { name: 'Bound a customer' });
    await panel.getByLabel('Customer id (as inferences name it)').fill('cus_new');
    await panel.getByLabel('Budget (USD, empty: none)').fill('5');
    await panel.getByLabel(/Hard stop/).uncheck();
    await panel.getByRole('button', { name: 'Save budget' }).click();
    await hasText(panel.getByRole('status'), 'Saved the budget of cus_new');
    await page.keyboard.press('Escape');
    await hasText(page.locator('tr[data-customer="cus_new"]'), '(alerts only)');
    expect((await api.get(`/v1/projects/${project.projectId}/customers/cus_new`)).body).toMatchObject({ budget_usd: 5, hard_stop: false });
    await page.close();
  });

  it('shows a key that only reads the list, and names the scopes that would set bounds (dark theme)', async () => {
    const page = await signIn(browser, base, reader, { dark: true });
    await openScreen(page, 'Customers');
    await page.locator('tr[data-customer="cus_42"]').waitFor();
    expect(await page.getByRole('button', { name: /Set bounds|Bound a customer/ }).count()).toBe(0);
    await hasText(page.getByRole('region', { name: 'Customers' }), 'needs budgets:manage (budget) or governance:manage (rate limits)');
    await expectAccessible(page, 'customers, read-only, dark');
    await screenshot(page, 'customers-readonly-dark');
    await page.close();
  });
});
