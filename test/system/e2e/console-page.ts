import type { Browser, Page } from 'playwright-core';
import { expect } from 'vitest';
import { seriousViolations } from './a11y.ts';
import { serveAdminDir } from './browser.ts';

/** A fresh browser context's page at the console's sign-in, in the light or dark theme (E2E_ADMIN_DIR: browser.ts). */
export async function consolePage(browser: Browser, base: string, opts: { dark?: boolean } = {}): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 }, colorScheme: opts.dark ? 'dark' : 'light' });
  await serveAdminDir(context, base);
  const page = await context.newPage();
  page.on('close', () => void context.close().catch(() => {}));
  await page.goto(`${base}/admin/`);
  return page;
}

/** Signs in with an API key (the operator key included) and waits for the navigation. */
export async function signIn(browser: Browser, base: string, secret: string, opts: { dark?: boolean } = {}): Promise<Page> {
  const page = await consolePage(browser, base, opts);
  await page.getByLabel('API key').fill(secret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  return page;
}

/** Opens a screen from the left navigation and waits for its title. */
export async function openScreen(page: Page, link: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: link, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: link }).waitFor();
}

export async function expectAccessible(page: Page, what: string): Promise<void> {
  const violations = await seriousViolations(page);
  expect(violations, `${what}: ${JSON.stringify(violations, null, 2)}`).toEqual([]);
}
