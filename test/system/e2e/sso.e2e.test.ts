import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, createTestDatabase, seedProject, type TestApp, type TestDatabase } from '../../helpers/app.ts';
import { OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, startOidcProvider, type TestOidcProvider } from '../../helpers/oidc-provider.ts';
import { freePort } from '../../helpers/ports.ts';
import { REDIS_URL, deleteRedisPrefix, uniqueName } from '../../helpers/services.ts';
import { SCIM_TOKEN, provisionGroup, provisionUser } from '../../helpers/sso.ts';
import { launchBrowser, screenshot } from './browser.ts';

const IDLE_S = 300;

let db: TestDatabase;
let t: TestApp;
let locked: TestApp;
let provider: TestOidcProvider;
let browser: Browser;
let base: string;
let lockedBase: string;
const redisPrefix = `${uniqueName('sso-e2e')}:`;
const projects: Record<'payments' | 'search' | 'secret', string> = { payments: '', search: '', secret: '' };

beforeAll(async () => {
  db = await createTestDatabase();
  // The ports come first: SVC_PUBLIC_URL names them, and the provider must know both gateways' callbacks.
  const mainPort = await freePort();
  const lockedPort = await freePort();
  base = `http://127.0.0.1:${mainPort}`;
  lockedBase = `http://127.0.0.1:${lockedPort}`;
  provider = await startOidcProvider([`${base}/auth/oidc/callback`, `${lockedBase}/auth/oidc/callback`]);
  ({ app: t } = await gatewayOn(mainPort, {}));
  ({ app: locked } = await gatewayOn(lockedPort, { SVC_CONSOLE_IP_ALLOWLIST: '10.0.0.0/8' }));

  const operator = client(t.app);
  projects.payments = (await seedProject(operator, { name: 'Payments' })).projectId;
  projects.search = (await seedProject(operator, { name: 'Search' })).projectId;
  projects.secret = (await seedProject(operator, { name: 'Secret project' })).projectId;
  const alice = await provisionUser(t.app, 'alice@example.com');
  const viewers = await provisionGroup(t.app, 'payments-viewers', [alice]);
  const admins = await provisionGroup(t.app, 'search-admins', [alice]);
  expect((await operator.put(`/v1/operator-groups/${viewers}/roles`, { roles: [{ project_id: projects.payments, role: 'viewer' }] })).status).toBe(200);
  expect((await operator.put(`/v1/operator-groups/${admins}/roles`, { roles: [{ project_id: projects.search, role: 'admin' }] })).status).toBe(200);
  // The search project may only be used from the office network.
  expect((await operator.put(`/v1/projects/${projects.search}/ip-allowlist`, { cidrs: ['10.0.0.0/8'] })).status).toBe(200);
  browser = await launchBrowser();
}, 240_000);

/** A gateway on a chosen port, sharing the database and Redis prefix (two replicas with different settings). */
async function gatewayOn(port: number, extra: Record<string, string>): Promise<{ app: TestApp }> {
  const url = `http://127.0.0.1:${port}`;
  const app = await buildTestApp({
    database: db,
    redisPrefix,
    env: {
      SVC_PUBLIC_URL: url,
      SVC_OIDC_ISSUER: provider.issuer,
      SVC_OIDC_CLIENT_ID: OIDC_CLIENT_ID,
      SVC_OIDC_CLIENT_SECRET: OIDC_CLIENT_SECRET,
      SVC_SCIM_TOKEN: SCIM_TOKEN,
      SVC_SESSION_IDLE_TIMEOUT_S: String(IDLE_S),
      ...extra,
    },
  });
  await app.app.listen({ host: '127.0.0.1', port });
  return { app };
}

afterAll(async () => {
  await browser?.close();
  await locked?.close();
  await t?.close();
  await provider?.close();
  await db?.drop();
  if (REDIS_URL) await deleteRedisPrefix(REDIS_URL, redisPrefix);
});

async function newPage(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
  const page = await context.newPage();
  page.on('close', () => void context.close().catch(() => {}));
  return page;
}

/** The whole OpenID Connect sign-in, as a person does it: the console's button, the provider's form, back. */
async function signInWithOidc(page: Page, at: string, email: string): Promise<void> {
  await page.goto(`${at}/admin/`);
  await page.getByRole('link', { name: 'Sign in with OpenID Connect' }).click();
  await page.getByRole('heading', { name: 'Test identity provider' }).waitFor();
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Continue' }).click();
}

describe('the console signed in through OpenID Connect (chromium, oidc-provider)', () => {
  it("signs in, sees only its groups' projects, is refused a project from a non-allowlisted address, and is signed out after the idle timeout", async () => {
    const page = await newPage();
    await signInWithOidc(page, base, 'alice@example.com');
    const picker = page.getByRole('region', { name: 'Choose a project' });
    await picker.waitFor();
    await page.locator('header.top').getByText('alice@example.com').waitFor();
    const rows = picker.locator('table.projects tbody tr');
    await rows.first().waitFor();
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-project-id')).sort())).toEqual([projects.payments, projects.search].sort());
    expect(await page.getByText('Secret project').count()).toBe(0);
    expect(await page.getByRole('region', { name: 'Create a project' }).count()).toBe(0);
    // Nothing of the session is readable by the page: the cookie is HttpOnly.
    expect(await page.evaluate(() => document.cookie)).toBe('');
    const cookies = await page.context().cookies();
    const sessionCookie = cookies.find((c) => c.name === 'svc_session')!;
    expect(sessionCookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    await screenshot(page, 'sso-01-projects');

    // Payments: a viewer reads it.
    await page.getByRole('button', { name: 'Open Payments' }).click();
    await page.getByRole('navigation', { name: 'Screens' }).waitFor();
    await page.getByRole('link', { name: 'Audit log' }).click();
    await page.getByRole('region', { name: 'Audit log' }).waitFor();
    await screenshot(page, 'sso-02-viewer-audit');

    // Search: an admin role, but only from 10.0.0.0/8; the browser is at 127.0.0.1.
    await page.getByRole('combobox', { name: 'Project' }).selectOption('');
    await page.getByRole('button', { name: 'Open Search' }).click();
    const refusal = page.getByRole('alert').filter({ hasText: "not in the project's console IP allowlist" });
    await refusal.first().waitFor();
    await screenshot(page, 'sso-03-project-ip-refused');

    // Idle: the gateway's clock moves past the idle timeout; the next call finds the session ended.
    // The picker loads its projects with the session: the clock moves only once they are shown, or that load itself
    // would find the session idle and the button would never appear.
    await page.getByRole('combobox', { name: 'Project' }).selectOption('');
    const openPayments = page.getByRole('button', { name: 'Open Payments' });
    await openPayments.waitFor();
    t.clock.advance((IDLE_S + 1) * 1000);
    await openPayments.click();
    const notice = page.getByTestId('signin-notice');
    await notice.waitFor();
    expect(await notice.textContent()).toContain('idle timeout');
    await page.getByRole('link', { name: 'Sign in with OpenID Connect' }).waitFor();
    await screenshot(page, 'sso-04-idle-signed-out');

    const ended = await client(t.app).get('/v1/audit/events', { query: { action: 'operator.sign_out' } });
    expect(ended.body.data[0].data).toMatchObject({ reason: 'idle_timeout' });
    const refused = await client(t.app).get('/v1/audit/events', { query: { action: 'operator.request_refused' } });
    expect(refused.body.data[0]).toMatchObject({ project_id: projects.search });
    await page.close();
  });

  it('signs out from the top bar: the session ends on the gateway', async () => {
    const page = await newPage();
    await signInWithOidc(page, base, 'alice@example.com');
    await page.getByRole('region', { name: 'Choose a project' }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByTestId('signin-notice').filter({ hasText: 'You signed out.' }).waitFor();
    // The cookie the browser still holds no longer opens anything.
    const status = await page.evaluate(async () => (await fetch('/auth/session')).status);
    expect(status).toBe(401);
    await page.close();
  });

  it('refuses the console from an address outside SVC_CONSOLE_IP_ALLOWLIST', async () => {
    const page = await newPage();
    await page.goto(`${lockedBase}/admin/`);
    await page.getByRole('alert').filter({ hasText: "not in the console's IP allowlist" }).first().waitFor();
    await screenshot(page, 'sso-05-console-ip-refused');
    // Going through the provider anyway ends at a refusal, without a session.
    await page.goto(`${lockedBase}/auth/oidc/start`);
    expect(await page.content()).toContain('insufficient_scope');
    expect((await page.context().cookies()).some((c) => c.name === 'svc_session')).toBe(false);
    await page.close();
  });
});
