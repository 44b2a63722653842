import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '../../../src/domain/keys/scopes.ts';
import { MASTER_KEY, buildTestApp, client, seedProject, type Client, type TestApp } from '../../helpers/app.ts';
import { multipart } from '../../rag/support.ts';
import { hasText, launchBrowser, screenshot } from './browser.ts';
import { expectAccessible, openScreen, signIn } from './console-page.ts';

/**
 * What the screenshots showed wrong in the console's layout, in Debian's chromium: a key's actions stacked, the
 * navigation's line about other scopes filling the navigation, the project switcher cutting off the project id, and
 * words glued to the value before them where a template line ended.
 */
const LONG_NAME = 'Payments platform, production (EU shared tenancy)';

let t: TestApp;
let base: string;
let browser: Browser;
let operator: Client;
let project: { projectId: string; keyId: string; secret: string };

beforeAll(async () => {
  t = await buildTestApp();
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  operator = client(t.app);
  project = await seedProject(operator, { name: LONG_NAME, scopes: ['keys:manage', 'governance:manage', 'inference:write', 'usage:read', 'audit:read', 'budgets:manage'] });
  await operator.post('/v1/keys', { project_id: project.projectId, name: 'from-the-console', scopes: ['keys:manage'] });
  browser = await launchBrowser();
}, 240_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

const box = async (l: Locator) => (await l.boundingBox())!;
const focusedText = (page: Page) => page.evaluate(() => document.activeElement?.textContent?.trim());

describe('the console layout', () => {
  it("lays out a key's actions in one row, in keyboard order, and scrolls the list inside its card when narrow", async () => {
    const page = await signIn(browser, base, project.secret);
    await openScreen(page, 'Keys');
    const row = page.locator(`tr[data-key-id="${project.keyId}"]`);
    const overlap = row.getByRole('combobox', { name: /^Overlap for / });
    const rotate = row.getByRole('button', { name: 'Rotate' });
    const revoke = row.getByRole('button', { name: 'Revoke' });
    await revoke.waitFor();
    const [o, r, v] = [await box(overlap), await box(rotate), await box(revoke)];
    const middle = (b: { y: number; height: number }) => b.y + b.height / 2;
    expect(Math.abs(middle(o) - middle(r))).toBeLessThan(4);
    expect(Math.abs(middle(r) - middle(v))).toBeLessThan(4);
    expect(o.x < r.x && r.x < v.x).toBe(true);
    // The list fits its card at this width: nothing spills past the card's edge.
    const card = page.getByRole('region', { name: 'Keys' });
    expect((await box(row)).x + (await box(row)).width).toBeLessThanOrEqual((await box(card)).x + (await box(card)).width);
    await overlap.focus();
    await page.keyboard.press('Tab');
    expect(await focusedText(page)).toBe('Rotate');
    await page.keyboard.press('Tab');
    expect(await focusedText(page)).toBe('Revoke');
    await revoke.click();
    await row.getByRole('group', { name: 'Confirm revoke' }).getByRole('button', { name: 'Cancel' }).waitFor();
    const [c, x] = [await box(row.getByRole('button', { name: 'Confirm revoke' })), await box(row.getByRole('button', { name: 'Cancel' }))];
    expect(Math.abs(middle(c) - middle(x))).toBeLessThan(4);
    await row.getByRole('button', { name: 'Cancel' }).click();
    // The top bar stays one row with the project's long name: the name gives way, its id stays whole.
    const top = page.locator('header.top');
    expect((await box(top)).height).toBeLessThan(56);
    const name = page.getByTestId('project-name');
    expect(await name.getAttribute('title')).toBe(`${LONG_NAME} (${project.projectId})`);
    expect(await name.locator('code').evaluate((el) => el.scrollWidth - el.clientWidth)).toBeLessThanOrEqual(0);
    await screenshot(page, 'layout-01-keys');
    await expectAccessible(page, 'Keys');

    // Narrow: the table scrolls inside the card instead of stretching it.
    await page.setViewportSize({ width: 900, height: 900 });
    const spill = await card.evaluate((el) => el.scrollWidth - el.clientWidth);
    expect(spill).toBeLessThanOrEqual(0);
    await screenshot(page, 'layout-05-keys-narrow');
    await page.close();
  });

  it('says in one line which scopes would show more screens, the whole list one key press away', async () => {
    const narrow = await operator.post('/v1/keys', { project_id: project.projectId, name: 'narrow', scopes: ['keys:manage'] });
    const page = await signIn(browser, base, narrow.body.secret);
    const more = page.getByTestId('more-scopes');
    const summary = more.locator('summary');
    await summary.waitFor();
    const fit = () => summary.evaluate((el) => ({ over: el.scrollWidth - el.clientWidth, lines: el.getBoundingClientRect().height / parseFloat(getComputedStyle(el).lineHeight), text: el.textContent }));
    const wide = await fit();
    expect(wide.over).toBeLessThanOrEqual(0);
    expect(wide.lines).toBeLessThan(1.5);
    expect(wide.text).toMatch(/^\d+ more screens/);
    expect(await summary.getAttribute('title')).toContain('audit:read (Audit log)');
    const list = more.getByRole('list', { name: 'Screens other scopes would show' });
    expect(await list.isVisible()).toBe(false);
    await summary.focus();
    await page.keyboard.press('Enter');
    await list.waitFor();
    await hasText(list.getByRole('listitem'), 'audit:read');
    await hasText(list.getByRole('listitem'), 'Webhooks');
    await screenshot(page, 'layout-02-more-screens');
    await expectAccessible(page, 'the navigation with the other scopes listed');
    // On a narrow window the navigation spans it: the line names the scopes themselves.
    await page.setViewportSize({ width: 700, height: 900 });
    await page.waitForFunction(() => document.querySelector('[data-testid="more-scopes"] summary')?.textContent?.includes('usage:read'));
    expect((await fit()).over).toBeLessThanOrEqual(0);
    await screenshot(page, 'layout-06-more-screens-narrow');
    await page.close();

    // One screen left out: the line names its scope.
    const most = SCOPES.filter((s) => !s.startsWith('ops:'));
    const almost = await operator.post('/v1/keys', { project_id: project.projectId, name: 'almost', scopes: most });
    expect(almost.status, JSON.stringify(almost.body)).toBe(200);
    const page2 = await signIn(browser, base, almost.body.secret);
    const one = page2.getByTestId('more-scopes').locator('summary');
    await hasText(one, 'ops:read');
    expect(await one.evaluate((el) => el.scrollWidth - el.clientWidth)).toBeLessThanOrEqual(0);
    await page2.close();
  });

  it("shows the whole project id in the operator's project switcher, the long name whole in its title", async () => {
    const page = await signIn(browser, base, MASTER_KEY);
    await page.getByRole('button', { name: `Open ${LONG_NAME}` }).click();
    const switcher = page.getByRole('combobox', { name: 'Project' });
    await switcher.waitFor();
    expect(await switcher.inputValue()).toBe(project.projectId);
    // The projects' names arrive after the switcher shows: wait for them.
    await expect.poll(() => switcher.getAttribute('title'), { timeout: 10_000 }).toBe(`${LONG_NAME} (${project.projectId})`);
    const shown = await switcher.evaluate((el: HTMLSelectElement) => {
      const option = el.options[el.selectedIndex]!;
      const probe = document.createElement('span');
      probe.style.font = getComputedStyle(el).font;
      probe.style.whiteSpace = 'pre';
      probe.textContent = option.textContent;
      document.body.append(probe);
      const width = probe.getBoundingClientRect().width;
      probe.remove();
      const style = getComputedStyle(el);
      // The room for the text: the select's inner width less its padding and the drop-down arrow.
      const room = el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 16;
      return { text: option.textContent, title: option.title, width, room };
    });
    expect(shown.text).toContain(`(${project.projectId})`);
    expect(shown.text).toContain('…');
    expect(shown.title).toBe(`${LONG_NAME} (${project.projectId})`);
    expect(shown.width).toBeLessThanOrEqual(shown.room);
    await screenshot(page, 'layout-03-switcher');
    await page.close();
  });

  it('keeps a word apart from the value before it where a template line ends (privacy, batches)', async () => {
    const page = await signIn(browser, base, project.secret);
    await openScreen(page, 'Privacy');
    const retention = page.locator('p', { hasText: 'Retention:' });
    await retention.waitFor();
    expect(await retention.innerText()).toMatch(/days \(changed /);
    await screenshot(page, 'layout-04-privacy');

    const line = JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-1', messages: [{ role: 'user', content: 'hi' }] } });
    const { payload, contentType } = multipart({ name: 'in.jsonl', type: 'application/jsonl', data: line }, { purpose: 'batch' });
    const up = await t.app.inject({ method: 'POST', url: '/v1/files', headers: { authorization: `Bearer ${project.secret}`, 'content-type': contentType }, payload });
    expect(up.statusCode, up.body).toBe(200);
    const b = await client(t.app, project.secret).post('/v1/batches', { input_file_id: JSON.parse(up.body).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect(b.status, JSON.stringify(b.body)).toBe(200);
    await openScreen(page, 'Batches');
    const progress = page.getByLabel(`Progress of ${b.body.id}`);
    await progress.waitFor();
    expect(await progress.innerText()).toMatch(/\d+\/1 · \d+ completed · \d+ failed/);
    await page.close();
  });
});
