import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../../helpers/app.ts';
import { writeProvidersFile } from '../../inference/fixtures.ts';
import { seriousViolations } from './a11y.ts';
import { hasText, launchBrowser, screenshot } from './browser.ts';

/**
 * The console's Providers and models, Playground, Budgets, Templates (new version with its diff) and the verticals'
 * create forms, in Debian's chromium: each screen's main path, a screenshot, and no serious axe-core violation.
 *
 * E2E_ADMIN_DIR serves the console from another build (vite build --outDir DIR) instead of dist/admin, so the screens
 * can be tried without rebuilding the shared dist/.
 */
const ADMIN_DIR = process.env.E2E_ADMIN_DIR;
const SCOPES = [
  'keys:manage', 'budgets:manage', 'inference:write', 'models:read', 'usage:read', 'templates:manage', 'governance:manage',
  'risk:write', 'ops:write', 'legal:write', 'dev:write',
];

let t: TestApp;
let base: string;
let browser: Browser;
let operator: Client;
let project: { projectId: string; keyId: string; secret: string };

beforeAll(async () => {
  const file = writeProvidersFile({
    providers: [
      { name: 'local', kind: 'mock', region: 'eu-west-1', models: [{ id: 'mock-1', input_per_mtok: 0.5, output_per_mtok: 1.5 }] },
      // Nothing listens on port 9: every call fails, and one failure opens its circuit (SVC_CIRCUIT_FAILURES=1).
      { name: 'flaky', kind: 'openai', base_url: 'http://127.0.0.1:9/v1', region: 'us-east-1', timeout_ms: 2000, models: [{ id: 'flaky-1', input_per_mtok: 3, output_per_mtok: 15 }] },
    ],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file, SVC_CIRCUIT_FAILURES: '1', SVC_CIRCUIT_COOLDOWN_MS: '3600000' } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  operator = client(t.app);
  const seeded = await seedProject(operator, { scopes: ['keys:manage'], name: 'Models project', limits: { requests_per_minute: 10_000, tokens_per_minute: 10_000_000, burst: 0 } });
  const admin = await operator.post('/v1/keys', { project_id: seeded.projectId, name: 'platform-team', scopes: SCOPES });
  project = { projectId: seeded.projectId, keyId: admin.body.id, secret: admin.body.secret };
  browser = await launchBrowser();
}, 240_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

const TYPES: Record<string, string> = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html', '.svg': 'image/svg+xml', '.ico': 'image/x-icon' };

async function openConsole(secret: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 }, permissions: ['clipboard-read', 'clipboard-write'] });
  if (ADMIN_DIR) {
    await context.route(`${base}/admin**`, async (route) => {
      const rel = new URL(route.request().url()).pathname.replace(/^\/admin\/?/, '') || 'index.html';
      const file = path.join(ADMIN_DIR, rel);
      const found = existsSync(file) && !rel.includes('..') ? file : path.join(ADMIN_DIR, 'index.html');
      await route.fulfill({ status: 200, body: readFileSync(found), headers: { 'content-type': TYPES[path.extname(found)] ?? 'application/octet-stream' } });
    });
  }
  const page = await context.newPage();
  page.on('close', () => void context.close().catch(() => {}));
  await page.goto(`${base}/admin/`);
  await page.getByLabel('API key').fill(secret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  return page;
}

async function open(page: Page, link: string, heading: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: link, exact: true }).click();
  await page.getByRole('heading', { name: heading }).first().waitFor();
}

async function expectAccessible(page: Page, what: string): Promise<void> {
  const violations = await seriousViolations(page);
  expect(violations, `${what}: ${JSON.stringify(violations, null, 2)}`).toEqual([]);
}

describe('Providers and models', () => {
  it('lists the providers file with prices and health, and tests a model with one recorded inference', async () => {
    // One failed call opens the flaky provider's circuit and counts in its error rate.
    const failed = await client(t.app, project.secret).post('/v1/chat/completions', { model: 'flaky-1', messages: [{ role: 'user', content: 'hi' }] });
    expect(failed.status).toBe(503);
    await t.deps.outcomes.flush({ timeoutMs: 10_000 });

    const page = await openConsole(project.secret);
    await open(page, 'Providers and models', 'Providers');
    const providers = page.getByRole('table', { name: 'Providers' });
    await hasText(providers.locator('tr[data-provider="local"]'), 'healthy');
    await hasText(providers.locator('tr[data-provider="flaky"]'), 'out (circuit open)');
    await hasText(providers.locator('tr[data-provider="flaky"]'), '100%');
    const models = page.getByRole('table', { name: 'Models' });
    await hasText(models.locator('tr[data-model="flaky/flaky-1"]'), '$15');

    const before = await t.deps.db.usageRecord.count({ where: { projectId: project.projectId, model: 'mock-1' } });
    await models.getByRole('button', { name: 'Test mock-1 on local' }).click();
    await hasText(page.getByTestId('test-result'), 'local/mock-1');
    await t.deps.outcomes.flush({ timeoutMs: 10_000 });
    expect(await t.deps.db.usageRecord.count({ where: { projectId: project.projectId, model: 'mock-1', keyId: project.keyId } })).toBe(before + 1);
    await page.getByRole('button', { name: 'Refresh' }).click();
    await hasText(providers.locator('tr[data-provider="local"]'), '0%');
    await screenshot(page, 'h42-01-models');
    await expectAccessible(page, 'Providers and models');
    await page.getByRole('button', { name: 'Use the dark theme' }).click();
    await screenshot(page, 'h42-01-models-dark');
    await expectAccessible(page, 'Providers and models, dark');
    await page.close();
  });
});

describe('Playground', () => {
  it('streams an answer as the session, then as a pasted key, and copies the request as code', async () => {
    const page = await openConsole(project.secret);
    await open(page, 'Playground', 'Playground');
    await page.getByLabel('Model', { exact: true }).fill('mock-1');
    await page.getByLabel('System prompt').fill('You are terse.');
    await page.getByLabel('Message', { exact: true }).fill('Hello from the playground');
    await page.getByRole('button', { name: 'Send' }).click();
    const conversation = page.getByRole('list', { name: 'Conversation' });
    await conversation.locator('li[data-role="assistant"]:not([data-streaming])').first().waitFor();
    await hasText(page.getByTestId('playground-meta'), 'local/mock-1');
    const requestId = (await page.getByTestId('playground-meta').locator('code').first().textContent())!;
    expect(requestId).toMatch(/^req_/);
    await t.deps.outcomes.flush({ timeoutMs: 10_000 });
    expect(await t.deps.db.usageRecord.findFirst({ where: { requestId } })).toMatchObject({ keyId: project.keyId, model: 'mock-1', status: 'succeeded' });

    // A pasted key: the request is that key's (and the key is in no storage of the page).
    const other = await operator.post('/v1/keys', { project_id: project.projectId, name: 'pasted', scopes: ['inference:write'] });
    await page.getByLabel('Run as').selectOption('key');
    await page.getByLabel('Key (not stored)').fill(other.body.secret);
    await page.getByLabel('Message', { exact: true }).fill('And as another key');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('li[data-role="assistant"]:not([data-streaming])').nth(1).waitFor();
    const pastedRequest = (await page.getByTestId('playground-meta').locator('code').first().textContent())!;
    await t.deps.outcomes.flush({ timeoutMs: 10_000 });
    expect((await t.deps.db.usageRecord.findFirst({ where: { requestId: pastedRequest } }))?.keyId).toBe(other.body.id);
    const stored = await page.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }));
    expect(stored).not.toContain(other.body.secret);

    await page.getByRole('button', { name: 'curl', exact: true }).click();
    await hasText(page.getByTestId('snippet'), `${base}/v1/chat/completions`);
    await hasText(page.getByTestId('snippet'), '$SVC_API_KEY');
    await page.getByRole('button', { name: 'Anthropic SDK', exact: true }).click();
    await hasText(page.getByTestId('snippet'), `ANTHROPIC_BASE_URL=${base}`);
    expect(await page.getByTestId('snippet').textContent()).not.toContain(other.body.secret);
    await page.getByRole('button', { name: 'openai SDK', exact: true }).click();
    await hasText(page.getByTestId('snippet'), `baseURL: "${base}/v1"`);
    await page.getByRole('button', { name: 'Copy as openai SDK' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toContain('client.chat.completions.create(');
    await screenshot(page, 'h42-02-playground');
    await expectAccessible(page, 'Playground');

    // Structured output: the schema goes with the request and the answer is JSON.
    await page.getByLabel('Run as').selectOption('session');
    await page.getByLabel('Structured output (JSON Schema)').check();
    await page.getByLabel('Message', { exact: true }).fill('Answer as JSON');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('li[data-role="assistant"]:not([data-streaming])').nth(2).waitFor();
    await screenshot(page, 'h42-03-playground-structured');
    await page.close();
  });
});

describe('Budgets', () => {
  it('sets the project budget and changes a key\'s budget, expiry and models after creation', async () => {
    const key = await operator.post('/v1/keys', { project_id: project.projectId, name: 'nightly-batch', scopes: ['inference:write'], budget_usd: 5 });
    const page = await openConsole(project.secret);
    await open(page, 'Budgets', 'Project budget');
    await hasText(page.getByTestId('project-budget'), 'none');
    await page.getByLabel('Monthly budget (USD)').fill('250');
    await page.getByRole('button', { name: 'Save budget' }).click();
    await hasText(page.getByTestId('project-budget'), '$250.00');
    expect((await operator.get(`/v1/projects/${project.projectId}/budget`)).body.budget_usd).toBe(250);

    const row = page.locator(`tr[data-key-id="${key.body.id}"]`);
    await hasText(row, '$5.00');
    await row.getByRole('button', { name: 'Edit nightly-batch' }).click();
    const panel = page.getByRole('dialog', { name: 'Edit key nightly-batch' });
    await panel.getByLabel('Monthly budget (USD, empty: none)').fill('12.5');
    await panel.getByLabel('Models (model, provider/model or provider/*, comma-separated; empty: every model)').fill('mock-1, local/*');
    await panel.getByLabel('Expires at (UTC, empty: never)').fill('2099-01-01T00:00');
    await screenshot(page, 'h42-04-budgets-edit-key');
    await expectAccessible(page, 'Budgets, edit key panel');
    await panel.getByRole('button', { name: 'Save key' }).click();
    await hasText(page.getByRole('status'), 'Saved nightly-batch');
    const after = (await operator.get(`/v1/keys/${key.body.id}`)).body;
    expect(after).toMatchObject({ budget_usd: 12.5, models: ['mock-1', 'local/*'], expires_at: Date.UTC(2099, 0, 1) / 1000 });
    await hasText(row, '$12.50');
    await screenshot(page, 'h42-05-budgets');
    await expectAccessible(page, 'Budgets');
    await page.close();
  });
});

describe('Templates', () => {
  it('publishes a new version from the screen, showing the diff against the current one', async () => {
    const created = await client(t.app, project.secret).post('/v1/templates', {
      project_id: project.projectId,
      name: 'support-reply',
      messages: [{ role: 'system', content: 'You answer support tickets.' }, { role: 'user', content: '{{ticket}}' }],
      variables: [{ name: 'ticket' }],
    });
    expect(created.status, created.raw).toBe(200);
    const page = await openConsole(project.secret);
    await open(page, 'Templates', 'Prompt templates');
    await page.locator(`tr[data-template-id="${created.body.id}"]`).getByRole('button', { name: 'Versions' }).click();
    await page.getByRole('button', { name: 'New version' }).click();
    const panel = page.getByRole('dialog', { name: 'New version of support-reply' });
    await panel.locator('textarea[name="content-0"]').fill('You answer support tickets politely, in {{language}}.');
    await panel.getByLabel(/^Variables/).fill('[{"name": "ticket"}, {"name": "language", "default": "English"}]');
    const diff = panel.getByLabel('Draft diff');
    await hasText(diff.locator('.removed'), 'You answer support tickets.');
    await hasText(diff.locator('.added'), 'politely, in {{language}}.');
    await hasText(diff.locator('.added'), 'variable language');
    await diff.scrollIntoViewIfNeeded();
    await screenshot(page, 'h42-06-template-new-version');
    await expectAccessible(page, 'Templates, new version');
    await panel.getByRole('button', { name: 'Publish v2' }).click();
    await hasText(page.getByRole('status'), 'Published v2');
    const versions = (await client(t.app, project.secret).get(`/v1/templates/${created.body.id}/versions`)).body.data;
    expect(versions.map((v: { version: number }) => v.version)).toEqual([2, 1]);
    expect(versions[0].variables).toContainEqual(expect.objectContaining({ name: 'language', default: 'English' }));
    await hasText(page.getByRole('table', { name: 'Versions' }), 'v2');
    await screenshot(page, 'h42-07-templates');
    await page.close();
  });
});

describe('Verticals', () => {
  it.each([
    ['Risk', 'case', async (p: Page) => {
      await p.getByLabel('Title', { exact: true }).fill('Vendor onboarding: Acme');
      await p.getByLabel('Assignee', { exact: true }).fill('alice');
      await p.getByLabel('Reviewer (not the assignee)').fill('bob');
    }, 'Vendor onboarding: Acme'],
    ['Ops', 'incident', async (p: Page) => {
      await p.getByLabel('Title', { exact: true }).fill('Checkout latency');
      await p.getByLabel('Severity').selectOption('sev2');
      await p.getByLabel('Service').fill('checkout');
    }, 'Checkout latency'],
    ['Legal', 'matter', async (p: Page) => {
      await p.getByLabel('Name', { exact: true }).fill('Acme supply agreement');
      await p.getByLabel('Client').fill('Acme');
    }, 'Acme supply agreement'],
    ['Dev', 'repository', async (p: Page) => {
      await p.getByLabel('Name', { exact: true }).fill('acme/api');
      await p.getByLabel('Git host').selectOption('gitlab');
    }, 'acme/api'],
  ] as const)('%s creates a %s from its tab and lists it with its status', async (tab, noun, fill, shown) => {
    const page = await openConsole(project.secret);
    await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: tab, exact: true }).click();
    await page.getByRole('button', { name: `New ${noun}` }).click();
    const panel = page.getByRole('dialog', { name: `New ${noun}` });
    await fill(panel as unknown as Page);
    await expectAccessible(page, `${tab}, new ${noun}`);
    await panel.getByRole('button', { name: `Create ${noun}` }).click();
    await hasText(page.getByRole('table').first(), shown);
    await screenshot(page, `h42-08-${tab.toLowerCase()}`);
    await expectAccessible(page, tab);
    await page.close();
  });

  it('Risk refuses a case whose reviewer is its assignee, naming the field', async () => {
    const page = await openConsole(project.secret);
    await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Risk', exact: true }).click();
    await page.getByRole('button', { name: 'New case' }).click();
    const panel = page.getByRole('dialog', { name: 'New case' });
    await panel.getByLabel('Title', { exact: true }).fill('Same person');
    await panel.getByLabel('Assignee', { exact: true }).fill('carol');
    await panel.getByLabel('Reviewer (not the assignee)').fill('carol');
    await panel.getByRole('button', { name: 'Create case' }).click();
    await hasText(panel.getByRole('alert'), 'segregation_of_duties');
    await page.close();
  });
});
