import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';

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
  // From the top: a full-page capture of a scrolled page draws the sticky top bar and navigation mid-page.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** Waits until the element shows the text (vitest's expect does not retry on locators). */
export async function hasText(locator: Locator, text: string): Promise<void> {
  await locator.filter({ hasText: text }).first().waitFor({ timeout: 10_000 });
}

/**
 * E2E_ADMIN_DIR serves the console from another build (`npx vite build --config src/admin/vite.config.ts --outDir DIR`)
 * instead of the gateway's dist/admin, so screens can be tried without rebuilding the shared dist/. Unset: nothing.
 */
const ADMIN_DIR = process.env.E2E_ADMIN_DIR;
const TYPES: Record<string, string> = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html', '.svg': 'image/svg+xml', '.ico': 'image/x-icon' };

export async function serveAdminDir(context: BrowserContext, base: string): Promise<void> {
  if (!ADMIN_DIR) return;
  await context.route(`${base}/admin**`, async (route) => {
    const rel = new URL(route.request().url()).pathname.replace(/^\/admin\/?/, '') || 'index.html';
    const file = path.join(ADMIN_DIR, rel);
    const found = existsSync(file) && !rel.includes('..') ? file : path.join(ADMIN_DIR, 'index.html');
    await route.fulfill({ status: 200, body: readFileSync(found), headers: { 'content-type': TYPES[path.extname(found)] ?? 'application/octet-stream' } });
  });
}

/** A page of its own (a fresh browser context) signed in to the console at `base` with an API key. */
export async function signInWithKey(browser: Browser, base: string, secret: string, opts: { clipboard?: boolean } = {}): Promise<Page> {
  const context = await browser.newContext({
    viewport: { width: 1366, height: 900 },
    ...(opts.clipboard ? { permissions: ['clipboard-read', 'clipboard-write'] } : {}),
  });
  await serveAdminDir(context, base);
  const page = await context.newPage();
  page.on('close', () => void context.close().catch(() => {}));
  await page.goto(`${base}/admin/`);
  await page.getByLabel('API key').fill(secret);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Screens' }).waitFor();
  return page;
}
