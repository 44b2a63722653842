import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** E2E_SCREENSHOTS moves them (e.g. to /tmp) to look at them without touching the tree. */
export const SCREENSHOTS = process.env.E2E_SCREENSHOTS ?? path.resolve(import.meta.dirname, 'screenshots');

/**
 * Debian's chromium, never a downloaded browser. The flags keep it from reaching out to the network (this machine
 * has none) and let it run as root in a container.
 */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** Waits until the element shows the text (vitest's expect does not retry on locators). */
export async function hasText(locator: Locator, text: string): Promise<void> {
  await locator.filter({ hasText: text }).first().waitFor({ timeout: 10_000 });
}

/** A page of its own (a fresh browser context) signed in to the console at `base` with an API key. */
export async function signInWithKey(browser: Browser, base: string, secret: string, opts: { clipboard?: boolean } = {}): Promise<Page> {
  const context = await browser.newContext({
    viewport: { width: 1366, height: 900 },
    ...(opts.clipboard ? { permissions: ['clipboard-read', 'clipboard-write'] } : {}),
  });
  const page = await context.newPage();
  page.on('close', () => void context.close().catch(() => {}));
  await page.goto(`${base}/admin/`);
  await page.getByLabel('API key').fill(secret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  return page;
}
