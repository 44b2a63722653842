import { describe, expect, it } from 'vitest';
import { applyRedline, checkMapping } from '../../src/domain/legal/checks.ts';
import { ContractText } from '../../src/domain/legal/quotes.ts';

const CONTRACT = [
  'MASTER SUPPLY AGREEMENT',
  '1. Term. This Agreement starts on 1 March 2026 and runs for “two (2) years”.',
  '2. Payment. Invoices are payable within',
  'sixty (60) days of receipt.',
  '3. Governing law. This Agreement is governed by the laws of England and Wales.',
  '4. Liability. Liability is capped at the fees paid in the prior 12 months.',
].join('\n');

describe('quotes in the contract text', () => {
  it('finds a verbatim quote, and one that differs only in whitespace, line breaks, curly quotes or dashes', () => {
    const text = new ContractText(CONTRACT);
    expect(text.find('governed by the laws of England and Wales')).toEqual({ start: CONTRACT.indexOf('governed by'), end: CONTRACT.indexOf('Wales') + 5 });
    // The PDF broke the line; the model wrote one space.
    const wrapped = text.find('payable within sixty (60) days');
    expect(CONTRACT.slice(wrapped!.start, wrapped!.end)).toBe('payable within\nsixty (60) days');
    expect(text.find('runs for "two (2) years"')).not.toBeNull();
    expect(text.find('  capped at the fees paid  ')).not.toBeNull();
  });

  it('does not find a paraphrase, another case or an elided quote', () => {
    const text = new ContractText(CONTRACT);
    expect(text.find('governed by English law')).toBeNull();
    expect(text.find('GOVERNED BY THE LAWS')).toBeNull();
    expect(text.find('capped at the fees ... 12 months')).toBeNull();
    expect(text.find('   ')).toBeNull();
  });
});

describe('a mapping', () => {
  it('keeps every requested field in order, flags quotes that are not in the contract, and matches names loosely', () => {
    const requested = [{ name: 'governing_law', description: 'Which law governs' }, { name: 'payment_days' }, { name: 'term' }, { name: 'auto_renewal' }, { name: 'notice' }];
    const checked = checkMapping(new ContractText(CONTRACT), requested, {
      fields: [
        { name: 'term', value: 'Two years from 1 March 2026', quote: 'runs for “two (2) years”', found: true },
        { name: 'Governing Law', value: 'England and Wales', quote: 'governed by the laws of England and Wales', found: true },
        { name: 'payment_days', value: '30 days', quote: 'payable within thirty (30) days', found: true },
        { name: 'auto_renewal', value: '', quote: '', found: false },
        { name: 'unrequested', value: 'x', quote: 'x', found: true },
        { name: 'notice', value: 'Not stated', quote: '', found: true },
      ],
    });
    expect(checked.fields.map((f) => [f.name, f.value, f.found, f.quote_verified])).toEqual([
      ['governing_law', 'England and Wales', true, true],
      ['payment_days', '30 days', true, false],
      ['term', 'Two years from 1 March 2026', true, true],
      ['auto_renewal', null, false, null],
      ['notice', 'Not stated', true, false],
    ]);
    expect(checked.fields[0]).toMatchObject({ description: 'Which law governs', quote_start: CONTRACT.indexOf('governed by') });
    expect(checked.fields[1]).toMatchObject({ quote: 'payable within thirty (30) days', quote_start: null });
    expect(checked.flagged_quotes).toBe(2);
  });

  it('shows a field the model left out as not answered', () => {
    const checked = checkMapping(new ContractText(CONTRACT), [{ name: 'term' }], { fields: [] });
    expect(checked).toEqual({ fields: [{ name: 'term', description: null, value: null, quote: null, found: null, quote_verified: null, quote_start: null }], flagged_quotes: 0 });
  });
});

describe('a redline', () => {
  it('applies edits whose passage it finds, and says why the others were not applied', () => {
    const text = 'Fees are due in 60 days. Late fees accrue after 60 days. Either party may terminate.';
    const { result, replacements } = applyRedline(new ContractText(text), {
      summary: 'Shorter payment terms.',
      edits: [
        { original: '60 days', proposed: '30 days', rationale: 'Playbook: net 30.' },
        { original: '60 days', proposed: '45 days', rationale: 'Grace period.' },
        { original: 'Fees are due in 60 days', proposed: 'Fees are due at once', rationale: 'overlaps the first' },
        { original: 'The Supplier indemnifies', proposed: 'x', rationale: 'hallucinated' },
        { original: 'Either party may terminate.', proposed: 'Either party may terminate.', rationale: 'no change' },
      ],
    });
    expect(result.edits.map((e) => [e.applied, e.not_applied, e.occurrences])).toEqual([
      [true, null, 2],
      [true, null, 2],
      [false, 'overlaps_another_edit', 1],
      [false, 'original_not_found', 0],
      [false, 'no_change', 1],
    ]);
    // The second "60 days" edit took the second occurrence.
    expect(replacements).toEqual([
      { start: text.indexOf('60 days'), end: text.indexOf('60 days') + 7, text: '30 days' },
      { start: text.lastIndexOf('60 days'), end: text.lastIndexOf('60 days') + 7, text: '45 days' },
    ]);
    expect(result.unapplied_edits).toBe(2);
    expect(result.summary).toBe('Shorter payment terms.');
  });
});
