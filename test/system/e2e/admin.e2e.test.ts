import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../../src/db/ids.ts';
import { AUDIT_ACTION_NAMES } from '../../../src/domain/audit/actions.ts';
import { EVENT_TYPES } from '../../../src/domain/events/outbox.ts';
import { SCOPES } from '../../../src/domain/keys/scopes.ts';
import { EVENT_GROUPS, SCOPE_GROUPS } from '../../../src/admin/app/catalog.ts';
import { MASTER_KEY, buildTestApp, client, seedProject, type Client, type TestApp } from '../../helpers/app.ts';
import { launchBrowser, screenshot, hasText, signInWithKey } from './browser.ts';

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

const signIn = (secret: string, opts: { clipboard?: boolean } = {}) => signInWithKey(browser, base, secret, opts);

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
    // One day of data: a bar on a 30-day dated axis, with a tooltip for the day under the cursor.
    const chart = page.locator('.usage-chart');
    await chart.locator('canvas').waitFor();
    const today = new Date(t.clock.now()).toISOString().slice(0, 10);
    // The screen list grew (templates, documents, evals, verticals): the chart may start below the fold.
    await chart.scrollIntoViewIfNeeded();
    const box = (await chart.locator('.u-over').boundingBox())!;
    await page.mouse.move(box.x + box.width - 4, box.y + box.height - 10);
    const tip = chart.getByRole('tooltip');
    await hasText(tip, today);
    await hasText(tip, '3 requests');
    expect(await chart.getAttribute('aria-label')).toContain('3 requests in all');
    expect(await page.getByText('Loading the admin console').count()).toBe(0);
    await hasText(page.locator('header.top'), project.keyId);
    await hasText(page.getByRole('main'), 'E2E project');
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
    // Lists first: the form opens in a side panel.
    await page.getByRole('button', { name: 'New key' }).click();
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
    // Lists first: the form opens in a side panel.
    await page.getByRole('button', { name: 'New key' }).click();
    const form = page.getByRole('form', { name: 'Create a key' });
    await form.getByLabel('Name').fill('twice');
    await form.getByLabel('keys:manage').check();
    await form.getByRole('button', { name: 'Create key' }).click();
    await page.getByTestId('new-secret').waitFor();
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await page.getByRole('button', { name: 'New key' }).click();
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

  it('leaves out the screens a key lacks the scope for, and names the scopes that would show them', async () => {
    const narrow = await operator.post('/v1/keys', { project_id: project.projectId, name: 'narrow', scopes: ['keys:manage'] });
    const page = await signIn(narrow.body.secret);
    const nav = page.getByRole('navigation', { name: 'Screens' });
    expect(await nav.getByRole('link', { name: 'Webhooks' }).count()).toBe(0);
    expect(await nav.getByRole('link', { name: 'Audit log' }).count()).toBe(0);
    const more = nav.getByTestId('more-scopes');
    await hasText(more, 'governance:manage');
    await hasText(more, 'audit:read');
    await hasText(more, 'Audit log');
    await screenshot(page, '06-narrow-key');
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('button', { name: 'New key' }).click();
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

describe('the admin console after the hardening review (issue 14)', () => {
  const tableRow = (page: Page, name: string) => page.locator('tr', { hasText: name });

  it('labels "Copied" per secret: a rotated secret offers to copy again, and the clipboard then holds it', async () => {
    const page = await signIn(project.secret, { clipboard: true });
    await page.getByRole('link', { name: 'Keys' }).click();
    // Lists first: the form opens in a side panel.
    await page.getByRole('button', { name: 'New key' }).click();
    const form = page.getByRole('form', { name: 'Create a key' });
    await form.getByLabel('Name').fill('copy-then-rotate');
    await form.getByLabel('inference:write').check();
    await form.getByRole('button', { name: 'Create key' }).click();
    const notice = page.getByRole('status').filter({ hasText: 'copy-then-rotate' });
    const first = (await notice.getByTestId('new-secret').textContent())!;
    await notice.getByRole('button', { name: 'Copy secret' }).click();
    await notice.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(first);

    await tableRow(page, 'copy-then-rotate').getByRole('button', { name: 'Rotate' }).click();
    await hasText(notice, 'New secret for copy-then-rotate');
    const second = (await notice.getByTestId('new-secret').textContent())!;
    expect(second).not.toBe(first);
    // The old secret is still on the clipboard: the button must not claim otherwise.
    expect(await notice.getByRole('button', { name: 'Copied' }).count()).toBe(0);
    await screenshot(page, '08-rotated-secret-not-copied');
    await notice.getByRole('button', { name: 'Copy secret' }).click();
    await notice.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(second);
    await page.close();
  });

  it('checks rate limits against the API bounds, and shows a refusal by the gateway at its field', async () => {
    const page = await signIn(project.secret);
    await page.getByRole('link', { name: 'Rate limits' }).click();
    const form = page.getByRole('form', { name: 'Edit rate limits' });
    await page.waitForFunction(() => (document.getElementById('limit-requestsPerMinute') as HTMLInputElement | null)?.value !== '');
    const field = (label: string) => form.getByLabel(label, { exact: true });
    const save = form.getByRole('button', { name: 'Save limits' });

    await field('Requests per minute').fill('2147483648');
    await hasText(form.locator('#requestsPerMinute-error'), 'At most 2,147,483,647.');
    expect(await save.isDisabled()).toBe(true);
    await field('Requests per minute').fill('-5');
    await hasText(form.locator('#requestsPerMinute-error'), 'At least 1.');
    await field('Requests per minute').fill('1.5');
    await hasText(form.locator('#requestsPerMinute-error'), 'A whole number from 1 to 2,147,483,647.');
    await field('Requests per minute').fill('100');
    await field('Burst (above requests per minute)').fill('-5');
    await hasText(form.locator('#burst-error'), 'At least 0.');
    expect(await field('Burst (above requests per minute)').getAttribute('aria-invalid')).toBe('true');
    await screenshot(page, '09-rate-limits-bounds');

    // The largest value the API takes is taken.
    await field('Burst (above requests per minute)').fill('0');
    await field('Tokens per minute').fill('2147483647');
    await save.click();
    await page.getByText('Saved: new limits apply').waitFor();
    expect((await operator.get(`/v1/projects/${project.projectId}/rate-limits`)).body.tokens_per_minute).toBe(2147483647);

    // A gateway that refuses what the console let through (an older console, other bounds): the error lands at its field.
    await page.route('**/graphql', async (route) => {
      const body = route.request().postDataJSON() as { query: string; variables: { input?: Record<string, unknown> } };
      if (!body.query.includes('updateRateLimits')) return route.continue();
      body.variables.input!.tokensPerMinute = 2147483648;
      return route.continue({ postData: JSON.stringify(body) });
    });
    await field('Tokens per minute').fill('5000');
    await save.click();
    await hasText(form.locator('#tokensPerMinute-error'), 'The gateway refused this value: a whole number from 1 to 2,147,483,647.');
    expect(await field('Tokens per minute').getAttribute('aria-invalid')).toBe('true');
    await hasText(page.getByRole('alert'), 'tokens_per_minute');
    await hasText(page.getByRole('alert'), 'Not saved: the gateway refused a value (shown at its field).');
    // GraphQL's own wording ("Int cannot represent non 32-bit signed integer value") is never shown to a person.
    expect(await page.getByRole('alert').innerText()).not.toMatch(/cannot represent|Variable "\$/);
    await screenshot(page, '10-rate-limits-server-error');
    await page.close();
  });

  it('filters the audit log by any action the gateway writes, read from the server', async () => {
    const hook = await client(t.app, project.secret).post('/v1/webhooks', {
      project_id: project.projectId,
      url: 'https://127.0.0.1:9/audit-filter',
      events: ['key.rotated'],
    });
    expect(hook.status).toBe(200);
    const page = await signIn(project.secret);
    await page.getByRole('link', { name: 'Audit log' }).click();
    const select = page.getByLabel('Action');
    await page.waitForFunction(() => document.querySelectorAll('select option').length > 1);
    const options = await select.locator('option').evaluateAll((all) => all.map((o) => (o as HTMLOptionElement).value));
    expect(options).toEqual(['', ...AUDIT_ACTION_NAMES]);
    expect(options).toEqual(expect.arrayContaining(['webhook.create', 'webhook.disable', 'routing_policy.create', 'routing_policy.delete']));
    await select.selectOption('webhook.create');
    const actions = () => page.locator('tbody td:nth-child(2) code').allTextContents().then((all) => [...new Set(all)]);
    await expect.poll(actions, { timeout: 5000 }).toEqual(['webhook.create']);
    await hasText(page.locator('tbody'), hook.body.id);
    await screenshot(page, '11-audit-filter-webhook');
    await page.close();
  });

  it('audits key.list once per console session and page, and every API call as before', async () => {
    const lister = await operator.post('/v1/keys', { project_id: project.projectId, name: 'lister', scopes: ['keys:manage'] });
    const keyLists = () => t.deps.db.auditEvent.findMany({ where: { action: 'key.list', actorKeyId: lister.body.id }, orderBy: { id: 'asc' } });
    const page = await signIn(lister.body.secret);
    const visitKeys = async () => {
      await page.getByRole('link', { name: 'Keys' }).click();
      await tableRow(page, 'lister').waitFor();
    };
    await visitKeys();
    await page.getByRole('link', { name: 'Overview' }).click();
    await visitKeys();
    await page.reload();
    await visitKeys();
    const once = await keyLists();
    expect(once).toHaveLength(1);
    const sessionId = await page.evaluate(() => sessionStorage.getItem('svc.admin.session'));
    expect(sessionId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(once[0]!.data).toMatchObject({ console_session: sessionId, console_page: 'first' });
    await page.close();

    // Signing in again is a new session: its first look is recorded.
    const again = await signIn(lister.body.secret);
    await again.getByRole('link', { name: 'Keys' }).click();
    await tableRow(again, 'lister').waitFor();
    expect(await keyLists()).toHaveLength(2);
    await again.close();

    // API callers (no console header) are audited on every call, as the spec asks.
    const api = client(t.app, lister.body.secret);
    expect((await api.get('/v1/keys')).status).toBe(200);
    expect((await api.get('/v1/keys')).status).toBe(200);
    expect(await keyLists()).toHaveLength(4);
  });

  it('lets the operator find projects in a picker and create one', async () => {
    await seedProject(operator, { scopes: ['usage:read'], name: 'Picker other project', plan: 'growth' });
    const page = await signIn(MASTER_KEY);
    const picker = page.getByRole('region', { name: 'Choose a project' });
    const row = tableRow(page, 'E2E project');
    await row.waitFor();
    await hasText(row, project.projectId);
    await hasText(row, 'starter');
    await hasText(row, 'active');
    expect(await picker.locator('th').allTextContents()).toEqual(['Name', 'Project id', 'Plan', 'Status', 'Region', 'Created', '']);
    await picker.getByLabel('Filter').fill('picker other');
    await expect.poll(() => picker.locator('tbody tr').count()).toBe(1);
    await hasText(picker.locator('tbody tr'), 'growth');
    await screenshot(page, '12-project-picker-filtered');
    await picker.getByLabel('Filter').fill('');

    const form = page.getByRole('form', { name: 'Create a project' });
    await form.getByLabel('Name').fill('Made in the console');
    await form.getByLabel('Plan').selectOption('growth');
    await form.getByLabel('Region (optional)').fill('eu-west-1');
    await form.getByRole('button', { name: 'Create project' }).click();
    const overview = page.getByRole('region', { name: 'Project' });
    await hasText(overview, 'Made in the console');
    await hasText(overview, 'growth');
    await hasText(overview, 'eu-west-1');
    const id = (await overview.locator('code').first().textContent())!;
    await hasText(page.locator('header.top'), id);
    const stored = await operator.get(`/v1/projects/${id}`);
    expect(stored.body).toMatchObject({ name: 'Made in the console', plan: 'growth', region: 'eu-west-1', status: 'active' });
    await screenshot(page, '13-project-created');

    // A refused create shows the gateway's error.
    await page.getByRole('combobox', { name: 'Project' }).selectOption('');
    await form.getByLabel('Name').fill(' ');
    await form.getByRole('button', { name: 'Create project' }).click();
    await hasText(page.getByRole('alert'), 'invalid_request');
    await page.close();
  });

  it('names the product on the sign-in page and serves a favicon on every page', async () => {
    const page = await browser.newPage({ viewport: { width: 1366, height: 900 } });
    const missing: string[] = [];
    page.on('response', (res) => {
      if (res.status() >= 400) missing.push(`${res.status()} ${res.url()}`);
    });
    await page.goto(`${base}/admin/`);
    await hasText(page.getByRole('heading', { level: 1 }), 'svc gateway');
    await hasText(page.getByRole('heading', { level: 1 }), 'Admin console');
    expect(await page.title()).toBe('svc gateway · Admin console');
    const icon = await page.locator('link[rel="icon"]').getAttribute('href');
    await screenshot(page, '14-sign-in');
    // The page's own icon loads (the request fails the list above otherwise).
    const svg = await fetch(`${base}${icon}`);
    expect([svg.status, svg.headers.get('content-type')]).toEqual([200, 'image/svg+xml']);
    const ico = await fetch(`${base}/favicon.ico`);
    expect(ico.status).toBe(200);
    expect(ico.headers.get('content-type')).toMatch(/^image\//);
    expect([...new Uint8Array(await ico.arrayBuffer()).slice(0, 4)]).toEqual([0, 0, 1, 0]);
    // Other pages of the origin (no <link rel=icon>) fall back to /favicon.ico.
    await page.goto(`${base}/docs/errors`);
    await page.goto(`${base}/favicon.ico`);
    expect(missing).toEqual([]);
    await page.close();
  });

  it('groups the scope and event checkboxes by area, each with its description', async () => {
    // Every scope and event type of the gateway sits in exactly one group.
    const names = (groups: typeof SCOPE_GROUPS) => groups.flatMap((g) => g.entries.map((e) => e.name)).sort();
    expect(names(SCOPE_GROUPS)).toEqual([...SCOPES].sort());
    expect(names(EVENT_GROUPS)).toEqual([...EVENT_TYPES].sort());
    for (const e of [...SCOPE_GROUPS, ...EVENT_GROUPS].flatMap((g) => g.entries)) expect(e.description).toMatch(/^\S.{8,}\.$/);

    const page = await signIn(MASTER_KEY);
    await tableRow(page, 'E2E project').getByRole('button', { name: 'Open E2E project' }).click();
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('button', { name: 'New key' }).click();
    const scopes = page.getByRole('form', { name: 'Create a key' });
    const keysGroup = scopes.getByRole('group', { name: 'Keys and audit' });
    const keysManage = keysGroup.getByLabel('keys:manage');
    const describedBy = (await keysManage.getAttribute('aria-describedby'))!;
    expect(await page.locator(`[id="${describedBy}"]`).textContent()).toBe('Create, rotate, revoke and list keys.');
    await scopes.getByRole('group', { name: 'Verticals' }).getByLabel('risk:approve').waitFor();
    expect(await scopes.locator('fieldset.grouped').getByRole('group').count()).toBe(SCOPE_GROUPS.length);
    await screenshot(page, '15-scopes-grouped');

    await page.getByRole('button', { name: 'Close' }).click();
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('button', { name: 'New webhook' }).click();
    const hooks = page.getByRole('form', { name: 'Create a webhook' });
    await hooks.getByLabel('HTTPS URL').fill('https://127.0.0.1:9/grouped');
    await hooks.getByRole('group', { name: 'Budgets' }).getByLabel('budget.threshold').check();
    await hooks.getByRole('group', { name: 'Verticals' }).getByLabel('ops.incident.opened').check();
    await hasText(hooks.getByRole('group', { name: 'Budgets' }), 'The monthly hard stop was reached.');
    await screenshot(page, '16-events-grouped');
    await hooks.getByRole('button', { name: 'Create webhook' }).click();
    await page.getByTestId('webhook-secret').waitFor();
    const list = await operator.get(`/v1/webhooks?project_id=${project.projectId}`);
    const created = list.body.data.find((w: { url: string }) => w.url === 'https://127.0.0.1:9/grouped');
    expect(created.events.sort()).toEqual(['budget.threshold', 'inference.completed', 'ops.incident.opened']);
    await page.close();
  });

  it('draws several days with cost on a second axis', async () => {
    const costly = await seedProject(operator, { scopes: ['usage:read'], name: 'Costly project' });
    const day = (daysAgo: number, ms: number) => new Date(t.clock.now() - daysAgo * 86_400_000 - ms);
    const rows = [
      ...Array.from({ length: 5 }, (_, i) => ({ at: day(2, i), cost: 24_000n })),
      { at: day(9, 0), cost: 3_000n },
      ...Array.from({ length: 2 }, (_, i) => ({ at: day(0, i), cost: 150_000n })),
    ];
    await t.deps.db.usageRecord.createMany({
      data: rows.map((r) => ({
        requestId: newId('req', r.at.getTime()),
        projectId: costly.projectId,
        keyId: costly.keyId,
        model: 'mock-1',
        status: 'succeeded',
        promptTokens: 10,
        completionTokens: 5,
        costMicros: r.cost,
        createdAt: r.at,
      })),
    });
    const page = await signIn(costly.secret);
    const chart = page.locator('.usage-chart');
    await chart.locator('canvas').waitFor();
    expect(await chart.getAttribute('aria-label')).toContain('8 requests in all');
    const table = page.getByRole('region', { name: 'Usage per day' }).locator('tbody tr');
    await expect.poll(() => table.count()).toBeGreaterThanOrEqual(2);
    await hasText(table.first(), '$0.30');
    await screenshot(page, '18-usage-with-cost');
    await page.close();
  });

  it('shows an empty state instead of a chart when the project has no usage', async () => {
    const quiet = await seedProject(operator, { scopes: ['usage:read'], name: 'Quiet project' });
    const page = await signIn(quiet.secret);
    await hasText(page.getByTestId('usage-empty'), 'No requests from');
    expect(await page.locator('.usage-chart').count()).toBe(0);
    await screenshot(page, '17-usage-empty');
    await page.close();
  });
});
