import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../../src/db/ids.ts';
import { MASTER_KEY, buildTestApp, client, seedProject, type Client, type TestApp } from '../../helpers/app.ts';
import { writeProvidersFile } from '../../inference/fixtures.ts';
import { multipart } from '../../rag/support.ts';
import { seriousViolations } from './a11y.ts';
import { SCREENSHOTS, hasText, launchBrowser, screenshot, signInWithKey } from './browser.ts';

/**
 * The console's layout (left navigation by area, project switcher, themes, keyboard) and its Requests and Spend
 * screens, plus the MCP and Batches screens' main paths; axe-core finds no serious violation on any of them.
 */
const SCOPES = ['usage:read', 'keys:manage', 'budgets:manage', 'inference:write', 'inference:read', 'governance:manage', 'audit:read'];

let t: TestApp;
let base: string;
let browser: Browser;
let operator: Client;
let project: { projectId: string; keyId: string; secret: string };
let other: { projectId: string; keyId: string; secret: string };
let second: { id: string; secret: string };

const DAY = 86_400_000;

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [
      {
        name: 'priced',
        kind: 'mock',
        region: 'eu-west-1',
        models: [
          { id: 'mock-1', input_per_mtok: 0, output_per_mtok: 0 },
          { id: 'mock-priced', input_per_mtok: 1, output_per_mtok: 2 },
          { id: 'mock-fallback', input_per_mtok: 1, output_per_mtok: 2 },
        ],
      },
      // Cheaper for mock-fallback, but nothing listens there: the request detail shows the failed hop, then the fallback.
      { name: 'flaky', kind: 'openai', base_url: 'http://127.0.0.1:9/v1', region: 'us-east-1', timeout_ms: 2000, models: [{ id: 'mock-fallback', input_per_mtok: 0.5, output_per_mtok: 0.5 }] },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_EGRESS_ALLOWLIST: '127.0.0.1' } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  operator = client(t.app);
  // Generous limits: the Requests screen polls, and several pages use one key.
  const seeded = await seedProject(operator, { scopes: ['keys:manage'], name: 'Console project', limits: { requests_per_minute: 10_000, tokens_per_minute: 10_000_000, burst: 0 } });
  const admin = await operator.post('/v1/keys', { project_id: seeded.projectId, name: 'platform-team', scopes: SCOPES });
  project = { projectId: seeded.projectId, keyId: admin.body.id, secret: admin.body.secret };
  other = await seedProject(operator, { scopes: ['usage:read'], name: 'Second project' });
  const k = await operator.post('/v1/keys', { project_id: project.projectId, name: 'batch-jobs', scopes: ['inference:write'], budget_usd: 5 });
  second = { id: k.body.id, secret: k.body.secret };
  expect((await operator.put(`/v1/projects/${project.projectId}/budget`, { budget_usd: 40 })).status).toBe(200);

  // History: 12 days of usage by two keys and two models, written as the outcome writer would.
  const now = t.clock.now();
  const rows = [];
  for (let d = 11; d >= 1; d--) {
    for (let i = 0; i < 3; i++) {
      const at = new Date(now - d * DAY + i * 60_000);
      const priced = i !== 2;
      rows.push({
        requestId: newId('req', at.getTime()),
        projectId: project.projectId,
        keyId: i === 1 ? second.id : project.keyId,
        model: priced ? 'mock-priced' : 'mock-1',
        route: priced ? 'priced/mock-priced' : 'priced/mock-1',
        region: 'eu-west-1',
        cacheHit: i === 2 && d % 3 === 0,
        status: d === 4 && i === 0 ? 'failed' : 'succeeded',
        errorCode: d === 4 && i === 0 ? 'provider_error' : null,
        promptTokens: 1000 * d,
        completionTokens: 500 * d,
        costMicros: priced ? BigInt(2000 * d) : 0n,
        latencyMs: 120 + 10 * d,
        createdAt: at,
      });
    }
  }
  await t.deps.db.usageRecord.createMany({ data: rows });
  browser = await launchBrowser();
}, 240_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

const signIn = (secret: string, opts: { dark?: boolean } = {}) => signInWithKey(browser, base, secret).then(async (page) => {
  if (opts.dark) await page.emulateMedia({ colorScheme: 'dark' });
  return page;
});

const nav = (page: Page) => page.getByRole('navigation', { name: 'Screens' });

async function expectAccessible(page: Page, what: string) {
  const violations = await seriousViolations(page);
  expect(violations, `${what}: ${JSON.stringify(violations, null, 2)}`).toEqual([]);
}

async function infer(secret: string, model: string, content: string, headers: Record<string, string> = {}) {
  const res = await client(t.app, secret).post('/v1/inference', { model, project_id: project.projectId, messages: [{ role: 'user', content }] }, { headers });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { request_id: string; id: string };
}

describe('the console layout', () => {
  it('groups the screens by area in a left navigation that the keyboard walks, in both themes', async () => {
    const page = await signIn(project.secret);
    const side = nav(page);
    for (const area of ['Traffic', 'Access', 'Models', 'Governance']) await side.getByRole('heading', { name: area }).waitFor();
    // Screens this key cannot use are not listed at all.
    expect(await side.getByRole('link', { name: 'Risk' }).count()).toBe(0);
    await hasText(side.getByTestId('more-scopes'), 'risk:read');
    // Keyboard: Down walks the links, Enter opens the screen.
    await side.getByRole('link', { name: 'Overview' }).focus();
    await page.keyboard.press('ArrowDown');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Requests');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Spend' }).waitFor();
    expect(await side.getByRole('link', { name: 'Spend' }).getAttribute('aria-current')).toBe('page');
    await page.keyboard.press('End');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe(await side.getByRole('link').last().textContent());
    await page.keyboard.press('Home');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Overview');
    await screenshot(page, 'console-01-nav-light');
    await expectAccessible(page, 'Spend, light');

    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe('light');
    await page.getByRole('button', { name: 'Use the dark theme' }).click();
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
    // The choice is remembered (only it: the key stays in sessionStorage).
    await page.reload();
    await nav(page).waitFor();
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
    expect(await page.evaluate(() => Object.keys(localStorage))).toEqual(['svc.admin.theme']);
    await screenshot(page, 'console-02-nav-dark');
    await expectAccessible(page, 'Spend, dark');
    await page.close();
  });

  it('follows the system colour scheme until one is chosen', async () => {
    const page = await signIn(project.secret, { dark: true });
    // Waited for, not read once: a CI run once read 'light' here, the emulated scheme not yet in effect when the
    // page first ran; the page follows the system's scheme live, so it must come to 'dark' without a reload.
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'light');
    await page.close();
  });

  it('lets the operator switch projects from the top bar', async () => {
    const page = await signIn(MASTER_KEY);
    await page.locator('tr', { hasText: 'Console project' }).getByRole('button', { name: 'Open Console project' }).click();
    const switcher = page.getByRole('combobox', { name: 'Project' });
    await switcher.waitFor();
    expect(await switcher.inputValue()).toBe(project.projectId);
    await nav(page).getByRole('link', { name: 'Requests' }).click();
    await page.locator('tr[data-request-id]').first().waitFor();
    await screenshot(page, 'console-03-operator-switcher');
    await switcher.selectOption(other.projectId);
    await hasText(page.locator('section.card[aria-label="Request log"]'), 'No requests yet');
    expect(await page.evaluate(() => sessionStorage.getItem('svc.admin.project'))).toBe(other.projectId);
    // "All projects…" goes back to the filterable list.
    await switcher.selectOption('');
    await page.getByRole('heading', { name: 'Choose a project' }).waitFor();
    await page.close();
  });
});

describe('Requests', () => {
  it('lists requests newest first, filters them, and opens one with its timeline, hops, trace id and retained content', async () => {
    // Through a fallback (flaky refuses the connection, priced answers), in the caller's trace.
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const live = await infer(project.secret, 'mock-fallback', 'What is the capital of France?', { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
    const page = await signIn(project.secret);
    await nav(page).getByRole('link', { name: 'Requests' }).click();
    const rows = page.locator('table.requests tbody tr');
    await rows.first().waitFor();
    expect(await rows.first().getAttribute('data-request-id')).toBe(live.request_id);
    const ids = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-request-id')!));
    expect(ids).toEqual([...ids].sort().reverse());
    expect(ids).toHaveLength(25);
    await screenshot(page, 'console-04-requests');
    await expectAccessible(page, 'Requests');

    // Filter: failed only.
    await page.getByLabel('Status').selectOption('failed');
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => rows.count()).toBe(1);
    await hasText(rows.first(), 'provider_error');
    await page.getByRole('button', { name: 'Clear' }).click();

    // Live: a new inference shows up without a reload.
    const fresh = await infer(second.secret, 'mock-1', 'Another one');
    await page.locator(`tr[data-request-id="${fresh.request_id}"]`).waitFor({ timeout: 15_000 });

    // The detail drawer.
    await page.locator(`tr[data-request-id="${live.request_id}"]`).getByRole('button', { name: `Details of ${live.request_id}` }).click();
    const drawer = page.getByRole('dialog', { name: `Request ${live.request_id}` });
    await drawer.getByTestId('request-detail').waitFor();
    for (const step of ['received', 'authenticated', 'validated', 'limits', 'cache', 'provider', 'answered', 'outcome']) await hasText(drawer.locator('ol.request-timeline'), step);
    await hasText(drawer, 'Answered by priced/mock-fallback (eu-west-1)');
    await hasText(drawer, 'flaky/mock-fallback failed (connection)');
    await hasText(drawer.getByTestId('trace-id'), traceId);
    await drawer.getByRole('button', { name: 'Copy trace id' }).waitFor();
    // The waterfall: a bar per step, a failed hop's bar among them; the hops listed with their outcomes.
    expect(await drawer.locator('ol.waterfall .wf-bar').count()).toBe(9);
    expect(await drawer.locator('ol.waterfall .wf-bar.failed').count()).toBe(1);
    const hops = drawer.getByTestId('provider-hops').locator('tbody tr');
    expect(await hops.count()).toBe(2);
    await hasText(hops.nth(0), 'flaky/mock-fallback');
    await hasText(hops.nth(0), 'fell back');
    await hasText(hops.nth(1), 'priced/mock-fallback');
    await hasText(hops.nth(1), 'ok');
    await hasText(drawer.getByTestId('retained-content'), 'What is the capital of France?');
    await screenshot(page, 'console-05-request-detail');
    await drawer.screenshot({ path: path.join(SCREENSHOTS, 'console-05b-request-detail-panel.png') });
    await drawer.getByTestId('provider-hops').scrollIntoViewIfNeeded();
    await drawer.screenshot({ path: path.join(SCREENSHOTS, 'console-05c-request-hops.png') });
    await expectAccessible(page, 'Request detail');
    // Dark: the page follows the system's theme, live.
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
    await drawer.screenshot({ path: path.join(SCREENSHOTS, 'console-05d-request-hops-dark.png') });
    await expectAccessible(page, 'Request detail, dark');
    await page.keyboard.press('Escape');
    await drawer.waitFor({ state: 'hidden' });
    await page.close();
  });

  it('does not show another project\'s request', async () => {
    const mine = await infer(project.secret, 'mock-1', 'mine');
    const res = await client(t.app, other.secret).post('/graphql', {
      query: 'query R($id: ID!) { requestDetail(requestId: $id) { record { requestId } } }',
      variables: { id: mine.request_id },
    });
    expect(res.body.errors[0].extensions.code).toBe('not_found');
  });
});

describe('Spend', () => {
  it('charts spend per day stacked by key and by model, with totals, the budget line and a CSV export', async () => {
    const page = await signIn(project.secret);
    await nav(page).getByRole('link', { name: 'Spend' }).click();
    const totals = page.getByTestId('spend-totals');
    await hasText(totals, '$40.00');
    // 11 days x 2 priced requests: 2000 micro-dollars x day number, twice a day: $0.264 in all.
    await hasText(totals, '$0.264');
    await page.locator('.spend-chart canvas').first().waitFor();
    const legend = page.getByRole('list', { name: 'Legend' }).first();
    await hasText(legend, 'batch-jobs');
    // $40 a month is far above $0.264: said in words, not drawn as a line that would flatten the curve.
    await hasText(page.getByTestId('budget-note'), 'The project budget of $40.00 a month is off this scale');
    await screenshot(page, 'console-06-spend-by-key');
    await expectAccessible(page, 'Spend');

    await page.getByLabel('Split by').selectOption('model');
    await hasText(page.locator('table.spend-values'), 'mock-priced');
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const csv = readFileSync(await (await download).path(), 'utf8');
    const lines = csv.trim().split('\r\n');
    expect(lines[0]).toBe('date,model,requests,prompt_tokens,completion_tokens,cost_usd');
    const day = new Date(t.clock.now() - 11 * DAY).toISOString().slice(0, 10);
    expect(lines).toContain(`${day},mock-priced,2,22000,11000,0.044000`);
    await screenshot(page, 'console-07-spend-by-model');

    // A budget near the spend is drawn as a line on the month-to-date chart.
    expect((await operator.put(`/v1/projects/${project.projectId}/budget`, { budget_usd: 0.3 })).status).toBe(200);
    await page.reload();
    await nav(page).getByRole('link', { name: 'Spend' }).click();
    await hasText(page.getByRole('list', { name: 'Legend' }).nth(1), 'Project budget $0.30 a month');
    expect(await page.getByTestId('budget-note').count()).toBe(0);
    await page.getByRole('button', { name: 'Use the dark theme' }).click();
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
    await screenshot(page, 'console-08-spend-dark');
    await expectAccessible(page, 'Spend, dark');
    await page.close();
  });
});

describe('MCP servers and Batches', () => {
  it('registers an MCP server from the side panel and lists it, its header value never shown', async () => {
    const page = await signIn(project.secret);
    await nav(page).getByRole('link', { name: 'MCP servers' }).click();
    await hasText(page.getByRole('region', { name: 'MCP servers' }), 'No MCP servers yet');
    // Lists first: the form opens in the side panel, and closes once the server is registered.
    await page.getByRole('button', { name: 'Register a server' }).click();
    const form = page.getByRole('form', { name: 'Register an MCP server' });
    await form.getByLabel('Name', { exact: true }).fill('files');
    await form.getByLabel('HTTPS URL').fill('https://127.0.0.1:9/mcp');
    await form.getByLabel('Header name').fill('Authorization');
    await form.getByLabel('Header value (sealed, never shown again)').fill('Bearer s3cret');
    await form.getByRole('button', { name: 'Register server' }).click();
    await page.getByRole('dialog', { name: 'Register an MCP server' }).waitFor({ state: 'hidden' });
    const row = page.locator('tr[data-server-id]', { hasText: 'files' });
    await hasText(row, 'Authorization');
    expect(await page.content()).not.toContain('s3cret');
    await screenshot(page, 'console-09-mcp');
    await expectAccessible(page, 'MCP servers');
    await page.close();
  });

  it('lists a batch with its progress and opens its detail', async () => {
    const line = (id: string) => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [{ role: 'user', content: `hi ${id}` }] } });
    const { payload, contentType } = multipart({ name: 'in.jsonl', type: 'application/jsonl', data: [line('a'), line('b')].join('\n') }, { purpose: 'batch' });
    const up = await t.app.inject({ method: 'POST', url: '/v1/files', headers: { authorization: `Bearer ${project.secret}`, 'content-type': contentType }, payload });
    expect(up.statusCode, up.body).toBe(200);
    const b = await client(t.app, project.secret).post('/v1/batches', { input_file_id: JSON.parse(up.body).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect(b.status).toBe(200);
    const page = await signIn(project.secret);
    await nav(page).getByRole('link', { name: 'Batches' }).click();
    const row = page.locator(`tr[data-batch-id="${b.body.id}"]`);
    await hasText(row, '/v1/chat/completions');
    await row.getByRole('link', { name: b.body.id }).click();
    await hasText(page.getByLabel(`Batch ${b.body.id}`), JSON.parse(up.body).id);
    await screenshot(page, 'console-10-batches');
    await expectAccessible(page, 'Batches');
    await page.close();
  });
});
