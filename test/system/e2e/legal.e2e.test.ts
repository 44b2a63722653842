import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VerticalWorker } from '../../../src/jobs/vertical-work/worker.ts';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../../helpers/app.ts';
import { startMockOpenAI, type MockOpenAI } from '../../helpers/mock-openai.ts';
import { writeProvidersFile } from '../../inference/fixtures.ts';
import { launchBrowser, screenshot, hasText, signInWithKey } from './browser.ts';

// The Legal vertical's flow in the console (issue 21): a matter, its contract, a mapping whose invented quote is
// flagged, and a redline shown as the gateway's diff. The model's answers come from a local OpenAI-wire mock.

let t: TestApp;
let base: string;
let browser: Browser;
let operator: Client;
let wire: MockOpenAI;

const CONTRACT = [
  'MASTER SUPPLY AGREEMENT',
  '',
  '1. Term. This Agreement starts on 1 March 2026 and runs for two (2) years.',
  '2. Payment. Invoices are payable within sixty (60) days of receipt.',
  '3. Governing law. This Agreement is governed by the laws of England and Wales.',
  '4. Liability. Liability is capped at the fees paid in the prior 12 months.',
  '',
].join('\n');

beforeAll(async () => {
  wire = await startMockOpenAI();
  const file = writeProvidersFile({
    providers: [{ name: 'wire', kind: 'openai', base_url: wire.url, region: 'local', timeout_ms: 5000, models: [{ id: 'wire-1', input_per_mtok: 1, output_per_mtok: 2 }] }],
  });
  t = await buildTestApp({ env: { SVC_PROVIDERS_FILE: file } });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
  operator = client(t.app);
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
  await wire?.close();
});

const signIn = (secret: string) => signInWithKey(browser, base, secret);

describe('the Legal vertical in the admin console', () => {
  it('a matter, its contract, a mapping with a flagged quote and a redline shown as a diff', async () => {
    const p = await seedProject(operator, { scopes: ['legal:write', 'inference:write'], name: 'Legal E2E' });
    const api = client(t.app, p.secret);
    const matter = (await api.post('/v1/legal/matters', { name: 'Acme supply agreement', client: 'Acme Ltd' })).body;
    const contract = (await api.post(`/v1/legal/matters/${matter.id}/contracts`, { name: 'Acme MSA', content: CONTRACT })).body;
    const worker = new VerticalWorker(t.deps);

    const mapping = (await api.post(`/v1/legal/contracts/${contract.id}/mappings`, { fields: [{ name: 'governing_law' }, { name: 'payment_terms' }, { name: 'auto_renewal' }] })).body;
    wire.set({
      content: JSON.stringify({
        fields: [
          { name: 'governing_law', value: 'England and Wales', quote: 'governed by the laws of England and Wales', found: true },
          { name: 'payment_terms', value: '30 days', quote: 'payable within thirty (30) days', found: true },
          { name: 'auto_renewal', value: '', quote: '', found: false },
        ],
      }),
    });
    expect(await worker.runDue()).toEqual(['succeeded']);
    const redline = (await api.post(`/v1/legal/contracts/${contract.id}/redlines`, { playbook: 'Payment: net 30. Liability: 2x annual fees.' })).body;
    wire.set({
      content: JSON.stringify({
        summary: 'Payment and liability brought in line with the playbook.',
        edits: [
          { original: 'payable within sixty (60) days', proposed: 'payable within thirty (30) days', rationale: 'Playbook: net 30.' },
          { original: 'capped at the fees paid in the prior 12 months', proposed: 'capped at twice the fees paid in the prior 12 months', rationale: 'Playbook: 2x annual fees.' },
        ],
      }),
    });
    expect(await worker.runDue()).toEqual(['succeeded']);

    const page = await signIn(p.secret);
    await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Legal' }).click();
    await page.getByRole('link', { name: 'Acme supply agreement' }).click();
    await hasText(page.locator(`tr[data-contract-id="${contract.id}"]`), contract.sha256);
    await page.getByRole('link', { name: 'Acme MSA' }).click();

    const m = page.locator(`[data-mapping-id="${mapping.id}"]`);
    await hasText(m.locator('tr[data-field="governing_law"]'), '✓ in the contract');
    await hasText(m.locator('tr[data-field="payment_terms"]'), '⚠ not in the contract');
    await hasText(m.locator('tr[data-field="auto_renewal"]'), 'not in the contract');
    await hasText(m.locator('header'), '1 flagged quote');
    expect(await m.locator('tr[data-field="payment_terms"]').getAttribute('class')).toBe('flagged');

    const r = page.locator(`[data-redline-id="${redline.id}"]`);
    const diff = r.getByLabel('Redline diff');
    await hasText(diff.locator('.removed'), '2. Payment. Invoices are payable within sixty (60) days of receipt.');
    await hasText(diff.locator('.added'), '2. Payment. Invoices are payable within thirty (30) days of receipt.');
    await hasText(diff.locator('.added'), 'capped at twice the fees paid');
    expect(await diff.locator('.hunk').allTextContents()).toEqual(['@@ -1,6 +1,6 @@']);
    await hasText(r, 'Payment and liability brought in line with the playbook.');
    await screenshot(page, 'legal-01-contract');
    await page.close();
  });
});
