import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/db/ids.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { launchBrowser, screenshot } from './browser.ts';

const ADMIN_SCOPES = ['keys:manage', 'governance:manage', 'audit:read', 'budgets:manage', 'usage:read', 'inference:write'];

let t: TestApp;
let base: string;
let browser: Browser;
let operator: Client;
let project: { projectId: string; keyId: string; secret: string };

beforeAll(async () => {
  t = await buildTestApp({ env: { SVC_EGRESS_ALLOWLIST: '127.0.0.1' } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const addr = t.app.server.address() as { port: number };
  base = `http://127.0.0.1:${addr.port}`;
  operator = client(t.app);
  project = await seedProject(operator, { scopes: ADMIN_SCOPES, name: 'E2E project' });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

/** Waits until the element shows the text (vitest's expect does not retry on locators). */
async function hasText(locator: Locator, text: string): Promise<void> {
  await locator.filter({ hasText: text }).first().waitFor({ timeout: 10_000 });
}

async function signIn(secret: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1366, height: 900 } });
  await page.goto(`${base}/admin/`);
  await page.getByLabel('API key').fill(secret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  return page;
}

describe('the admin console', () => {
  it('signs in with a key kept in sessionStorage only, and shows the project overview', async () => {
    const api = client(t.app, project.secret);
    expect((await operator.put(`/v1/projects/${project.projectId}/budget`, { budget_usd: 25 })).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const res = await api.post('/v1/inference', { model: 'mock-1', project_id: project.projectId, messages: [{ role: 'user', content: `hi ${i}` }] });
      expect(res.status).toBe(200);
    }
    const page = await signIn(project.secret);
    await page.getByText('of $25.00').waitFor();
    await page.locator('.chart .bar').first().waitFor();
    expect(await page.getByText('Loading the admin console').count()).toBe(0);
    await hasText(page.locator('header.top'), project.keyId);
    await page.getByText('E2E project').waitFor();
    const storage = await page.evaluate(() => ({ local: localStorage.length, session: JSON.stringify(sessionStorage), url: location.href }));
    expect(storage.local).toBe(0);
    expect(storage.session).toContain(project.secret);
    expect(storage.url).not.toContain(project.secret);
    await screenshot(page, '01-overview');
    await page.close();
  });

  it('creates a key, shows its secret once, revokes it, and the REST API then refuses it', async () => {
    const page = await signIn(project.secret);
    await page.getByRole('link', { name: 'Keys' }).click();
    const form = page.getByRole('form', { name: 'Create a key' });
    await form.getByLabel('Name').fill('from-the-console');
    await form.getByLabel('keys:manage').check();
    await form.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.getByTestId('new-secret').textContent())!;
    expect(secret).toMatch(/^svc_sk_[0-9A-Za-z]{48}$/);
    await screenshot(page, '02-keys-secret-once');

    const api = client(t.app, secret);
    expect((await api.get('/v1/keys')).status).toBe(200);

    await page.getByRole('button', { name: 'I have stored it' }).click();
    expect(await page.content()).not.toContain(secret);
    const row = page.locator('tr', { hasText: 'from-the-console' });
    await hasText(row, `svc_sk_...${secret.slice(-4)}`);

    await row.getByRole('button', { name: 'Revoke' }).click();
    await row.getByRole('button', { name: 'Confirm revoke' }).click();
    await row.locator('.status.revoked').waitFor();
    await screenshot(page, '03-keys-revoked');
    const refused = await api.get('/v1/keys');
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('invalid_api_key');
    await page.close();
  });

  it('shows an API error with its code and request id', async () => {
    const page = await signIn(project.secret);
    await page.getByRole('link', { name: 'Keys' }).click();
    const form = page.getByRole('form', { name: 'Create a key' });
    await form.getByLabel('Name').fill('twice');
    await form.getByLabel('keys:manage').check();
    await form.getByRole('button', { name: 'Create key' }).click();
    await page.getByTestId('new-secret').waitFor();
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await form.getByLabel('Name').fill('twice');
    await form.getByLabel('keys:manage').check();
    await form.getByRole('button', { name: 'Create key' }).click();
    const alert = form.getByRole('alert');
    await hasText(alert, 'key_name_conflict');
    await hasText(alert, 'req_');
    await page.close();
  });

  it('edits rate limits with the validation shown inline', async () => {
    const page = await signIn(project.secret);
    await page.getByRole('link', { name: 'Rate limits' }).click();
    const form = page.getByRole('form', { name: 'Edit rate limits' });
    // The current limits load first (the plan default of a starter project).
    await page.waitForFunction(() => (document.getElementById('limit-requestsPerMinute') as HTMLInputElement | null)?.value === '60');
    await form.getByLabel('Requests per minute', { exact: true }).fill('0');
    await hasText(form, 'At least 1.');
    expect(await form.getByRole('button', { name: 'Save limits' }).isDisabled()).toBe(true);
    await form.getByLabel('Requests per minute', { exact: true }).fill('120');
    await form.getByLabel('Tokens per minute', { exact: true }).fill('200000');
    await form.getByLabel('Burst (above requests per minute)', { exact: true }).fill('5');
    await form.getByRole('button', { name: 'Save limits' }).click();
    await page.getByText('Saved: new limits apply').waitFor();
    await screenshot(page, '04-rate-limits');
    const stored = await operator.get(`/v1/projects/${project.projectId}/rate-limits`);
    expect(stored.body).toMatchObject({ requests_per_minute: 120, tokens_per_minute: 200000, burst: 5 });
    await page.close();
  });

  it('replays a failed delivery', async () => {
    const hook = await client(t.app, project.secret).post('/v1/webhooks', {
      project_id: project.projectId,
      url: 'https://127.0.0.1:9/hook',
      events: ['key.revoked'],
    });
    expect(hook.status).toBe(200);
    // A delivery that already exhausted its schedule (the schedule itself is covered by the webhook tests).
    const now = new Date(t.clock.now());
    const event = await t.deps.db.event.create({
      data: { id: newId('evt'), projectId: project.projectId, type: 'key.revoked', data: { key_id: project.keyId }, createdAt: now },
    });
    const failed = await t.deps.db.webhookDelivery.create({
      data: {
        id: newId('del'),
        webhookId: hook.body.id,
        eventId: event.id,
        projectId: project.projectId,
        eventType: 'key.revoked',
        status: 'failed',
        attempts: 6,
        lastAttemptAt: now,
        nextAttemptAt: null,
        responseStatus: 500,
        createdAt: now,
      },
    });
    const page = await signIn(project.secret);
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.locator('tr', { hasText: hook.body.id }).getByRole('button', { name: 'Deliveries' }).click();
    const row = page.locator(`tr[data-delivery-id="${failed.id}"]`);
    await row.getByRole('button', { name: 'Replay' }).click();
    await page.locator('tr[data-delivery-id]').nth(1).waitFor();
    await screenshot(page, '05-webhook-deliveries');
    const deliveries = await t.deps.db.webhookDelivery.findMany({ where: { eventId: event.id } });
    expect(deliveries).toHaveLength(2);
    await page.close();
  });

  it('disables the screens a key lacks the scope for, naming the scope', async () => {
    const narrow = await operator.post('/v1/keys', { project_id: project.projectId, name: 'narrow', scopes: ['keys:manage'] });
    const page = await signIn(narrow.body.secret);
    const nav = page.getByRole('navigation', { name: 'Screens' });
    await hasText(nav.locator('[aria-disabled="true"]', { hasText: 'Webhooks' }), 'governance:manage');
    await hasText(nav.locator('[aria-disabled="true"]', { hasText: 'Audit log' }), 'audit:read');
    await screenshot(page, '06-narrow-key');
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('form', { name: 'Create a key' }).waitFor();
    await page.close();
  });

  it('pages through the audit log filtered by action', async () => {
    const page = await signIn(project.secret);
    await page.getByRole('link', { name: 'Audit log' }).click();
    await page.getByLabel('Action').selectOption('key.create');
    // The unfiltered list also holds key.create rows, so wait for the filtered answer to replace it.
    const actions = () => page.locator('tbody td:nth-child(2) code').allTextContents().then((all) => [...new Set(all)]);
    await expect.poll(actions, { timeout: 5000 }).toEqual(['key.create']);
    await screenshot(page, '07-audit-log');
    await page.close();
  });
});
