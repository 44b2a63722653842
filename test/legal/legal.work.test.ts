import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAPPING_PROMPT, REDLINE_PROMPT } from '../../src/domain/legal/prompts.ts';
import { client, type Client, type TestApp } from '../helpers/app.ts';
import type { MockOpenAI } from '../helpers/mock-openai.ts';
import { runVerticalWork, startWireApp, verticalProject } from '../verticals/support.ts';
import { CONTRACT_TEXT, LEGAL, newContract, newMatter } from './support.ts';

// The model's answers set by the test (an OpenAI-wire mock provider): what the gateway does with a realistic mapping
// (hallucinated quotes flagged) and redline, and a project's own template replacing a built-in Legal prompt.

let t: TestApp;
let operator: Client;
let wire: MockOpenAI;
let close: () => Promise<void>;

beforeAll(async () => ({ t, operator, wire, close } = await startWireApp()));
afterAll(() => close());
beforeEach(() => wire.reset());

const as = (secret: string) => client(t.app, secret);

async function contractOf() {
  const p = await verticalProject(operator, LEGAL);
  const api = as(p.secret);
  const m = await newMatter(api);
  const c = await newContract(api, m.id);
  return { ...p, api, matterId: m.id as string, contractId: c.id as string };
}

describe('a mapping', () => {
  it('flags the quotes that do not occur in the contract (hallucinated or paraphrased), and locates the others', async () => {
    const x = await contractOf();
    const queued = await x.api.post(`/v1/legal/contracts/${x.contractId}/mappings`, {
      fields: [{ name: 'governing_law' }, { name: 'payment_terms' }, { name: 'term' }, { name: 'auto_renewal' }],
    });
    wire.set({
      content: JSON.stringify({
        fields: [
          { name: 'governing_law', value: 'England and Wales', quote: 'governed by the laws of England and Wales', found: true },
          // The contract says sixty (60) days: this quote is invented.
          { name: 'payment_terms', value: '30 days', quote: 'Invoices are payable within thirty (30) days of receipt.', found: true },
          // Verbatim but for the spacing the model normalised.
          { name: 'term', value: 'Two years', quote: 'runs  for two (2)\nyears', found: true },
          { name: 'auto_renewal', value: '', quote: '', found: false },
        ],
      }),
    });
    expect(await runVerticalWork(t)).toEqual(['succeeded']);
    // The built-in prompt: the contract's text, the fields asked, the schema as response_format.
    const req = wire.requests.at(-1)!.body;
    expect(req.model).toBe('wire-1');
    expect(req.messages[0].content).toContain('[svc:legal.mapping]');
    expect(req.messages[1].content).toContain(CONTRACT_TEXT.trim());
    expect(req.messages[1].content).toContain('"name": "payment_terms"');
    expect(req.response_format).toMatchObject({ type: 'json_schema', json_schema: { name: 'legal_mapping', schema: MAPPING_PROMPT.schema } });

    const done = (await x.api.get(`/v1/legal/mappings/${queued.body.id}`)).body;
    expect(done).toMatchObject({ status: 'completed', flagged_quotes: 1 });
    expect(done.fields.map((f: any) => [f.name, f.value, f.found, f.quote_verified, f.quote_start])).toEqual([
      ['governing_law', 'England and Wales', true, true, CONTRACT_TEXT.indexOf('governed by the laws')],
      ['payment_terms', '30 days', true, false, null],
      ['term', 'Two years', true, true, CONTRACT_TEXT.indexOf('runs for two')],
      ['auto_renewal', null, false, null, null],
    ]);
    expect(done.fields[1].quote).toBe('Invoices are payable within thirty (30) days of receipt.');
  });

  it('fails with structured_output_failed when the answer does not match the schema', async () => {
    const x = await contractOf();
    const queued = await x.api.post(`/v1/legal/contracts/${x.contractId}/mappings`, { fields: [{ name: 'term' }] });
    wire.set({ content: '{"fields": [{"name": "term"}]}' });
    expect(await runVerticalWork(t)).toEqual(['failed']);
    const failed = (await x.api.get(`/v1/legal/mappings/${queued.body.id}`)).body;
    expect(failed).toMatchObject({ status: 'failed', flagged_quotes: null, error: { code: 'structured_output_failed' } });
    expect(failed.fields).toEqual([{ name: 'term', description: null, value: null, quote: null, found: null, quote_verified: null, quote_start: null }]);
  });
});

describe('a redline', () => {
  it('applies the edits found in the text, reports those not found, and diffs the contract with them applied', async () => {
    const x = await contractOf();
    const queued = await x.api.post(`/v1/legal/contracts/${x.contractId}/redlines`, { playbook: 'Payment: net 30. Liability: 2x annual fees.' });
    wire.set({
      content: JSON.stringify({
        summary: 'Two changes to match the playbook.',
        edits: [
          { original: 'payable within sixty (60) days', proposed: 'payable within thirty (30) days', rationale: 'Playbook: net 30.' },
          { original: 'The original liability cap is the fees paid in the prior 12 months.', proposed: 'Liability is capped at twice the fees paid in the prior 12 months.', rationale: 'Playbook: 2x annual fees.' },
          { original: 'The Supplier may assign this Agreement.', proposed: '', rationale: 'No assignment.' },
        ],
      }),
    });
    expect(await runVerticalWork(t)).toEqual(['succeeded']);
    expect(wire.requests.at(-1)!.body.messages[1].content).toContain('Playbook:\nPayment: net 30. Liability: 2x annual fees.');
    expect(wire.requests.at(-1)!.body.response_format.json_schema).toMatchObject({ name: 'legal_redline', schema: REDLINE_PROMPT.schema });
    const done = (await x.api.get(`/v1/legal/redlines/${queued.body.id}`)).body;
    expect(done).toMatchObject({ status: 'completed', summary: 'Two changes to match the playbook.', unapplied_edits: 1 });
    expect(done.edits.map((e: any) => [e.applied, e.not_applied])).toEqual([[true, null], [true, null], [false, 'original_not_found']]);
    expect(done.diff).toBe(
      [
        '--- a/msa.txt',
        '+++ b/msa.txt',
        '@@ -1,7 +1,7 @@',
        ' MASTER SUPPLY AGREEMENT',
        ' ',
        ' 1. Term. This Agreement starts on 1 March 2026 and runs for two (2) years.',
        '-2. Payment. Invoices are payable within sixty (60) days of receipt.',
        '+2. Payment. Invoices are payable within thirty (30) days of receipt.',
        ' 3. Governing law. This Agreement is governed by the laws of England and Wales.',
        '-4. Liability. The original liability cap is the fees paid in the prior 12 months.',
        '+4. Liability. Liability is capped at twice the fees paid in the prior 12 months.',
        ' 5. Notices. Notices are given in writing; a quote of this clause is not needed.',
        '',
      ].join('\n'),
    );
  });
});

describe("a project's own template", () => {
  it('replaces the built-in legal.mapping prompt (rendered by the pipeline); the result keeps the built-in schema and checks', async () => {
    const x = await contractOf();
    const tpl = await operator.post('/v1/templates', {
      project_id: x.projectId,
      name: 'legal.mapping',
      messages: [
        { role: 'system', content: 'House style for the firm.' },
        { role: 'user', content: 'Map {{fields}} in:\n{{contract_text}}' },
      ],
      variables: [{ name: 'fields' }, { name: 'contract_text' }],
      params: { temperature: 0.3 },
    });
    expect(tpl.status, tpl.raw).toBe(200);
    const queued = await x.api.post(`/v1/legal/contracts/${x.contractId}/mappings`, { fields: [{ name: 'governing_law' }] });
    wire.set({ content: JSON.stringify({ fields: [{ name: 'governing_law', value: 'England', quote: 'laws of England', found: true }] }) });
    expect(await runVerticalWork(t)).toEqual(['succeeded']);
    const body = wire.requests.at(-1)!.body;
    expect(body.messages.map((m: any) => m.role)).toEqual(['system', 'user']);
    expect(body.messages[0].content).toBe('House style for the firm.');
    expect(body.messages[1].content).toMatch(/^Map \[\n {2}\{\n {4}"name": "governing_law"\n {2}\}\n\] in:\nMASTER SUPPLY AGREEMENT/);
    expect(body.messages.map((m: any) => m.content).join('\n')).not.toContain('[svc:legal.mapping]');
    expect(body.temperature).toBe(0.3);
    expect(body.response_format.json_schema.name).toBe('legal_mapping');
    const done = (await x.api.get(`/v1/legal/mappings/${queued.body.id}`)).body;
    expect(done.fields[0]).toMatchObject({ value: 'England', quote_verified: true });
    await t.deps.outcomes.flush();
    const usage = await t.deps.db.usageRecord.findFirstOrThrow({ where: { projectId: x.projectId } });
    expect(usage).toMatchObject({ templateId: tpl.body.id, templateVersion: 1, keyId: x.keyId });
    // Another project keeps the built-in prompt.
    const y = await contractOf();
    await y.api.post(`/v1/legal/contracts/${y.contractId}/mappings`, { fields: [{ name: 'term' }] });
    await runVerticalWork(t);
    expect(wire.requests.at(-1)!.body.messages[0].content).toContain('[svc:legal.mapping]');
  });
});
