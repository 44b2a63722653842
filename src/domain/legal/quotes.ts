/**
 * Finding a model's quote (a mapping's `quote`, a redline edit's `original`) in the contract text. A quote counts when
 * it occurs verbatim, or verbatim but for typography a model or a PDF extraction changes without changing the words:
 * runs of whitespace (line breaks included) read as one space, curly quotes as straight ones, dashes as hyphens.
 * Case, words and punctuation must match: a paraphrase is not a quote.
 */
export interface Span {
  /** Offsets in the contract text (UTF-16 code units), end exclusive. */
  start: number;
  end: number;
}

const QUOTES = /[\u2018\u2019\u201A\u201B\u2032\u0060\u00B4]/;
const DOUBLE_QUOTES = /[\u201C\u201D\u201E\u201F\u2033\u00AB\u00BB]/;
const DASHES = /[\u2010-\u2015\u2212]/;
const SPACE = /\s/;

function fold(ch: string): string {
  if (SPACE.test(ch)) return ' ';
  if (QUOTES.test(ch)) return "'";
  if (DOUBLE_QUOTES.test(ch)) return '"';
  if (DASHES.test(ch)) return '-';
  return ch;
}

/** A text folded as above, with the offset in the original text of each folded character. */
function folded(text: string): { text: string; at: number[] } {
  let out = '';
  const at: number[] = [];
  let lastSpace = false;
  for (let i = 0; i < text.length; i++) {
    const c = fold(text[i]!);
    if (c === ' ') {
      if (lastSpace) continue;
      lastSpace = true;
    } else lastSpace = false;
    out += c;
    at.push(i);
  }
  return { text: out, at };
}

/** The contract text, searchable for quotes (the folded form is built once, on the first quote that needs it). */
export class ContractText {
  private fold: { text: string; at: number[] } | null = null;

  constructor(readonly text: string) {}

  /**
   * Every occurrence of the quote (trimmed), in order: verbatim ones first if there are any, else folded ones. Empty
   * when the quote is blank or absent.
   */
  findAll(quote: string): Span[] {
    const q = quote.trim();
    if (!q) return [];
    const exact: Span[] = [];
    for (let i = this.text.indexOf(q); i !== -1; i = this.text.indexOf(q, i + 1)) exact.push({ start: i, end: i + q.length });
    if (exact.length > 0) return exact;
    this.fold ??= folded(this.text);
    const fq = folded(q).text;
    const spans: Span[] = [];
    for (let i = this.fold.text.indexOf(fq); i !== -1; i = this.fold.text.indexOf(fq, i + 1)) {
      spans.push({ start: this.fold.at[i]!, end: this.fold.at[i + fq.length - 1]! + 1 });
    }
    return spans;
  }

  find(quote: string): Span | null {
    return this.findAll(quote)[0] ?? null;
  }
}
