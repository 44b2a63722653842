import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MASTER_KEY, buildTestApp, client, seedProject, type TestApp } from '../../helpers/app.ts';
import {
  SAML_ENTRY_POINT,
  SP_BASE,
  provisionGroup,
  provisionUser,
  scim,
  signInBySaml,
  ssoEnv,
  testSamlIdp,
  testSigningKeys,
} from '../../helpers/sso.ts';
import { hasText, launchBrowser, screenshot } from './browser.ts';
import { expectAccessible, openScreen, signIn } from './console-page.ts';

/**
 * Access → SSO and operators in Debian's chromium: the operator key sees who SCIM provisioned with their roles and last
 * sign-in, the sign-in settings (never a secret), changes a group's roles and the project's console allowlist in the
 * side panel; a project key with governance:manage sees the allowlist only; without it the screen is not listed.
 */
let t: TestApp;
let base: string;
let browser: Browser;
const projects = { payments: '', search: '' };
let key: { secret: string };
let usageOnly: string;
let ann: string;
let viewers: string;

beforeAll(async () => {
  const keys = testSigningKeys();
  t = await buildTestApp({ env: ssoEnv(keys.cert) });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  const operator = client(t.app);
  const payments = await seedProject(operator, { name: 'Payments', scopes: ['governance:manage', 'usage:read'] });
  projects.payments = payments.projectId;
  key = payments;
  usageOnly = (await operator.post('/v1/keys', { project_id: payments.projectId, name: 'analyst', scopes: ['usage:read'] })).body.secret;
  projects.search = (await seedProject(operator, { name: 'Search' })).projectId;
  ann = await provisionUser(t.app, 'ann@example.com');
  const bob = await provisionUser(t.app, 'bob@example.com');
  const admins = await provisionGroup(t.app, 'payments-admins', [ann]);
  viewers = await provisionGroup(t.app, 'search-viewers', [ann, bob]);
  expect((await operator.put(`/v1/operator-groups/${admins}/roles`, { roles: [{ project_id: projects.payments, role: 'admin' }] })).status).toBe(200);
  expect((await operator.put(`/v1/operator-groups/${viewers}/roles`, { roles: [{ project_id: projects.search, role: 'viewer' }] })).status).toBe(200);
  // Ann signs in once (SAML); Bob is deactivated by the identity provider.
  await signInBySaml(t.app, testSamlIdp(keys), 'ann@example.com');
  const off = await scim(t.app)('PATCH', `/scim/v2/Users/${bob}`, {
    schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
    Operations: [{ op: 'replace', path: 'active', value: false }],
  });
  expect(off.status).toBe(200);
  browser = await launchBrowser();
}, 240_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('SSO and operators', () => {
  it('shows the operator key the operators, their roles and sign-ins, and the sign-in settings', async () => {
    const page = await signIn(browser, base, MASTER_KEY);
    await page.getByRole('button', { name: 'Open Payments' }).click();
    await openScreen(page, 'SSO and operators');
    const operators = page.getByRole('table', { name: 'Operators' });
    const annRow = operators.locator(`tr[data-operator-id="${ann}"]`);
    await annRow.waitFor();
    await hasText(annRow, 'payments-admins, search-viewers');
    await hasText(annRow, 'SAML 2.0');
    expect(await annRow.locator('li.current').textContent()).toMatch(/Payments\s*admin/);
    await hasText(operators.locator('tr', { hasText: 'bob@example.com' }), 'deprovisioned');
    const settings = page.getByRole('region', { name: 'Sign-in settings' });
    await hasText(settings, SAML_ENTRY_POINT);
    await hasText(settings, `${SP_BASE}/scim/v2`);
    await hasText(settings, 'Off (SVC_OIDC_ISSUER unset)');
    expect(await settings.textContent()).not.toContain('BEGIN CERTIFICATE');
    await expectAccessible(page, 'operators');
    await screenshot(page, 'operators');
    await page.close();
  });

  it("changes a group's roles in the side panel", async () => {
    const page = await signIn(browser, base, MASTER_KEY);
    await page.getByRole('button', { name: 'Open Payments' }).click();
    await openScreen(page, 'SSO and operators');
    await page.getByRole('button', { name: 'Edit roles of search-viewers' }).click();
    const panel = page.getByRole('dialog', { name: 'Roles of search-viewers' });
    await panel.getByLabel('Role in row 1').selectOption('admin');
    await panel.getByRole('button', { name: 'Add a project' }).click();
    expect(await panel.getByLabel('Project of row 2').inputValue()).toBe(projects.payments);
    await expectAccessible(page, 'roles panel');
    await screenshot(page, 'operators-roles-panel');
    await panel.getByRole('button', { name: 'Save roles' }).click();
    await hasText(page.getByRole('status'), 'Saved the roles of search-viewers');
    await hasText(page.locator(`tr[data-group-id="${viewers}"]`), 'Search');
    const groups = (await client(t.app).get('/v1/operator-groups')).body.data as { id: string; roles: unknown[] }[];
    expect(groups.find((g) => g.id === viewers)?.roles).toEqual(
      [{ project_id: projects.search, role: 'admin' }, { project_id: projects.payments, role: 'viewer' }].sort((a, b) => a.project_id.localeCompare(b.project_id)),
    );
    await page.close();
  });

  it("sets the project's console IP allowlist, refusing a bad address at its field", async () => {
    const page = await signIn(browser, base, key.secret);
    await openScreen(page, 'SSO and operators');
    // A project key reads the sign-in methods, not the operators.
    await hasText(page.getByTestId('sign-in-methods'), 'SAML 2.0, API key');
    await hasText(page.getByTestId('operators-need'), 'operator key');
    expect(await page.getByRole('table', { name: 'Operators' }).count()).toBe(0);
    await hasText(page.getByTestId('project-allowlist'), 'Any address');
    await page.getByRole('button', { name: 'Edit allowlist' }).click();
    const panel = page.getByRole('dialog', { name: 'Console IP allowlist' });
    const box = panel.getByLabel('Addresses or CIDRs, one a line (empty: any address)');
    await box.fill('10.0.0.0/8\nnot-an-address');
    await panel.getByRole('button', { name: 'Save allowlist' }).click();
    await hasText(panel.locator('#allowlist-error'), 'not-an-address');
    expect(await box.getAttribute('aria-invalid')).toBe('true');
    await box.fill('10.0.0.0/8');
    await panel.getByRole('button', { name: 'Save allowlist' }).click();
    await hasText(page.getByTestId('project-allowlist'), '10.0.0.0/8');
    const stored = await client(t.app).get(`/v1/projects/${projects.payments}/ip-allowlist`);
    expect(stored.body.cidrs).toEqual(['10.0.0.0/8']);
    await page.close();
  });

  it('shows a project key the allowlist in the dark theme, and hides the screen from a key without governance:manage', async () => {
    const page = await signIn(browser, base, key.secret, { dark: true });
    await openScreen(page, 'SSO and operators');
    await page.getByTestId('project-allowlist').waitFor();
    await expectAccessible(page, 'operators as a project key, dark');
    await screenshot(page, 'operators-key-dark');
    await page.close();

    const other = await signIn(browser, base, usageOnly);
    const side = other.getByRole('navigation', { name: 'Screens' });
    expect(await side.getByRole('link', { name: 'SSO and operators' }).count()).toBe(0);
    await hasText(side.getByTestId('more-scopes'), 'SSO and operators');
    await other.close();
  });
});
