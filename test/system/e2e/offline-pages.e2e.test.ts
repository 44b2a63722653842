import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MASTER_KEY, buildTestApp, type TestApp } from '../../helpers/app.ts';
import { launchBrowser, screenshot } from './browser.ts';

/**
 * The gateway's pages with the network cut: every request that is not to the gateway itself is aborted (and recorded),
 * so a page that needs a CDN shows blank here and the test says which URL it wanted. GraphiQL, the API reference and
 * GET / must render and work from the gateway's own assets.
 */
let t: TestApp;
let base: string;
let browser: Browser;

beforeAll(async () => {
  t = await buildTestApp();
  base = await t.app.listen({ host: '127.0.0.1', port: 0 });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

/** A page whose requests may only reach the gateway; `blocked` lists the others (which are aborted). */
async function offlinePage(): Promise<{ page: Page; context: BrowserContext; blocked: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
  const blocked: string[] = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(base) || url.startsWith('blob:') || url.startsWith('data:')) return route.continue();
    blocked.push(url);
    return route.abort('internetdisconnected');
  });
  const page = await context.newPage();
  return { page, context, blocked };
}

describe('pages that work offline', () => {
  it('GraphiQL renders from the gateway\'s own assets and runs a query', async () => {
    const { page, context, blocked } = await offlinePage();
    try {
      await page.goto(`${base}/graphiql`);
      // The query editor and the run button are GraphiQL's own; they exist only once its scripts ran.
      const run = page.locator('.graphiql-execute-button');
      await run.waitFor({ timeout: 30_000 });
      await screenshot(page, 'graphiql-offline');
      // The key a user types into the headers editor, added here on the way out instead (the page keeps nothing).
      await context.route(`${base}/graphql`, (route) =>
        route.continue({ headers: { ...route.request().headers(), authorization: `Bearer ${MASTER_KEY}` } }),
      );
      await page.locator('.graphiql-query-editor .monaco-editor, .graphiql-editor .monaco-editor').first().click();
      await page.keyboard.press('Control+A');
      await page.keyboard.insertText('{ viewer { keyId } }');
      // The editor closes the first brace by itself: whatever follows the typed text goes.
      await page.keyboard.press('Shift+Control+End');
      await page.keyboard.press('Delete');
      await run.click();
      await page.getByText('key_master').first().waitFor({ timeout: 15_000 }).catch(async (err) => {
        await screenshot(page, 'graphiql-failed');
        throw err;
      });
      await screenshot(page, 'graphiql-offline-query');
      expect(blocked).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('GET / shows the links to the console, GraphiQL, the API reference and the error codes', async () => {
    const { page, context, blocked } = await offlinePage();
    try {
      await page.goto(`${base}/`);
      await page.getByRole('heading', { name: 'svc gateway' }).waitFor();
      const links = await page.getByRole('link').evaluateAll((as) => as.map((a) => [a.textContent, a.getAttribute('href')]));
      expect(links).toEqual(
        expect.arrayContaining([
          ['Admin console', '/admin'],
          ['GraphiQL', '/graphiql'],
          ['API reference', '/docs/api/'],
          ['Error codes', '/docs/errors'],
        ]),
      );
      await screenshot(page, 'home');
      // The favicon every page of the origin asks for.
      const icon = await page.request.get(`${base}/favicon.ico`);
      expect(icon.status()).toBe(200);
      await page.getByRole('link', { name: 'API reference' }).click();
      await page.locator('.swagger-ui .opblock').first().waitFor({ timeout: 30_000 });
      // Swagger UI renders the operations as the page is scrolled to them: scroll as a reader would.
      const inference = page.getByText('/v1/inference', { exact: true }).first();
      for (let i = 0; i < 40 && !(await inference.isVisible()); i++) await page.mouse.wheel(0, 500);
      await inference.waitFor();
      await screenshot(page, 'api-reference-offline');
      expect(blocked).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('GET / answers JSON to an API client', async () => {
    const res = await fetch(`${base}/`, { headers: { accept: 'application/json' } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; links: Record<string, string | null> };
    expect(body.object).toBe('svc.gateway');
    expect(body.links).toMatchObject({ admin: '/admin', graphiql: '/graphiql', api_reference: '/docs/api/', errors: '/docs/errors', openapi: '/openapi.json' });
  });
});
