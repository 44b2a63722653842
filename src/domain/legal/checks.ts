import type { Replacement } from './diff.ts';
import { ContractText, type Span } from './quotes.ts';

/**
 * What the gateway does with the model's structured answers before they become a mapping or a redline: it never
 * trusts a quote or a passage it was given, but looks each up in the contract text.
 */

export interface RequestedField {
  name: string;
  description?: string | null;
}

/** One requested field as a mapping shows it. */
export interface MappedField {
  name: string;
  description: string | null;
  /** The model's answer; null when it gave none. */
  value: string | null;
  /** The model's verbatim quote; null when it gave none. */
  quote: string | null;
  /** Whether the model says the contract states the field; null when its answer left the field out. */
  found: boolean | null;
  /**
   * true: the quote occurs in the contract text (quotes.ts: verbatim but for whitespace and typography); false: it does
   * not (a hallucinated or paraphrased quote), or the field is said to be found without a quote; null: nothing to check.
   */
  quote_verified: boolean | null;
  /** Where the quote starts in the contract text (UTF-16 offset); null unless verified. */
  quote_start: number | null;
}

export interface MappingResult {
  fields: MappedField[];
  /** How many fields have quote_verified false: the ones a reviewer must look at. */
  flagged_quotes: number;
}

export interface ModelMapping {
  fields: { name: string; value: string; quote: string; found: boolean }[];
}

/** Names compared loosely when no exact match exists: "Governing law" answers "governing_law". */
const loose = (name: string) => name.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, '');
const orNull = (s: string | undefined) => (s === undefined || s.trim() === '' ? null : s);

/** Each requested field, in the order asked, with the model's answer for it and its quote checked. */
export function checkMapping(text: ContractText, requested: RequestedField[], answer: ModelMapping): MappingResult {
  const unused = [...answer.fields];
  const take = (pred: (f: ModelMapping['fields'][number]) => boolean) => {
    const i = unused.findIndex(pred);
    return i === -1 ? undefined : unused.splice(i, 1)[0];
  };
  const byName = requested.map((r) => take((f) => f.name === r.name));
  const fields = requested.map((r, i) => {
    const given = byName[i] ?? take((f) => loose(f.name) === loose(r.name));
    const quote = orNull(given?.quote);
    const span: Span | null = quote === null ? null : text.find(quote);
    const found = given ? given.found : null;
    const verified = quote !== null ? span !== null : found === true ? false : null;
    return {
      name: r.name,
      description: r.description ?? null,
      value: orNull(given?.value),
      quote,
      found,
      quote_verified: verified,
      quote_start: span?.start ?? null,
    } satisfies MappedField;
  });
  return { fields, flagged_quotes: fields.filter((f) => f.quote_verified === false).length };
}

/** Why an edit was not applied. */
export type NotApplied = 'original_not_found' | 'overlaps_another_edit' | 'no_change';

export interface RedlineEdit {
  original: string;
  proposed: string;
  rationale: string;
  /** Whether the gateway applied it to the text the diff shows. */
  applied: boolean;
  not_applied: NotApplied | null;
  /** Where the passage starts in the contract text (UTF-16 offset); null when not found. */
  start: number | null;
  /** How often the passage occurs: above 1, the edit was applied to the first occurrence no other edit took. */
  occurrences: number;
}

export interface RedlineResult {
  summary: string;
  edits: RedlineEdit[];
  /** How many edits were not applied (their passage is not in the contract, or another edit took it). */
  unapplied_edits: number;
}

export interface ModelRedline {
  summary: string;
  edits: { original: string; proposed: string; rationale: string }[];
}

/**
 * The model's edits located in the contract text, in its order: each replaces the first occurrence of its passage
 * that no earlier edit took. A passage not in the text (a hallucination or a paraphrase) is not applied, and said so.
 */
export function applyRedline(text: ContractText, answer: ModelRedline): { result: RedlineResult; replacements: Replacement[] } {
  const taken: Span[] = [];
  const replacements: Replacement[] = [];
  const edits = answer.edits.map((e): RedlineEdit => {
    const base = { original: e.original, proposed: e.proposed, rationale: e.rationale };
    const spans = text.findAll(e.original);
    if (spans.length === 0) return { ...base, applied: false, not_applied: 'original_not_found', start: null, occurrences: 0 };
    const free = spans.find((s) => taken.every((t) => s.end <= t.start || s.start >= t.end));
    if (!free) return { ...base, applied: false, not_applied: 'overlaps_another_edit', start: spans[0]!.start, occurrences: spans.length };
    if (text.text.slice(free.start, free.end) === e.proposed) {
      return { ...base, applied: false, not_applied: 'no_change', start: free.start, occurrences: spans.length };
    }
    taken.push(free);
    replacements.push({ start: free.start, end: free.end, text: e.proposed });
    return { ...base, applied: true, not_applied: null, start: free.start, occurrences: spans.length };
  });
  return {
    result: { summary: answer.summary, edits, unapplied_edits: edits.filter((e) => !e.applied && e.not_applied !== 'no_change').length },
    replacements,
  };
}
