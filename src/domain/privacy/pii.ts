import { isIP } from 'node:net';
import { SvcError } from '../../errors/svc-error.ts';
import { onceAsync } from '../../kernel/once.ts';

/** CONTRACT §11: what the redaction finds, in the order it looks (a value found by an earlier kind is not looked at again). */
export const PII_KINDS = ['email', 'iban', 'card', 'ssn', 'ip', 'phone'] as const;
export type PiiKind = (typeof PII_KINDS)[number];

const LABEL: Record<PiiKind, string> = { email: 'EMAIL', iban: 'IBAN', card: 'CARD', ssn: 'SSN', ip: 'IP', phone: 'PHONE' };

/** One value found: where, and the form that makes two spellings of it the same value (same placeholder). */
interface Found {
  start: number;
  end: number;
  canonical: string;
}

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;
// Country code, check digits, then groups of up to four (printed with spaces or not, in either case); validated by
// ibantools.
const IBAN = /\b[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,4})?\b/g;
const CARD = /\b\d(?:[ -]?\d){12,18}\b/g;
// Printed with dots (4111.1111.1111.1111): groups of three to six digits, not part of a longer dotted number.
const CARD_DOTTED = /(?<!\d|\d\.)\d{3,6}(?:\.\d{3,6}){2,4}(?!\d|\.\d)/g;
// The SSA's rules: no 000, 666 or 9xx area, no 00 group, no 0000 serial.
const SSN = /\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b/g;
// Not inside a longer dotted number (a version 1.2.3.4.5), but a sentence's full stop may follow.
const IPV4 = /(?<!\d|\d\.)(?:\d{1,3}\.){3}\d{1,3}(?!\d|\.\d)/g;
// An embedded IPv4 tail (::ffff:192.168.1.10) is tried first, so that the whole address is one value.
const IPV6 = /(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?(?![\w:]|\.\d)/g;

function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

function matches(text: string, re: RegExp, check: (m: string) => string | null): Found[] {
  const out: Found[] = [];
  for (const m of text.matchAll(re)) {
    const canonical = check(m[0]);
    if (canonical !== null) out.push({ start: m.index, end: m.index + m[0].length, canonical });
  }
  return out;
}

function cardNumber(m: string): string | null {
  const digits = m.replace(/[ .-]/g, '');
  return digits.length >= 13 && digits.length <= 19 && luhn(digits) ? digits : null;
}

/** An IBAN printed in groups may run into the next word: drop trailing groups until it validates. */
function ibans(text: string): Found[] {
  const { electronicFormatIBAN, isValidIBAN } = loaded();
  const out: Found[] = [];
  for (const m of text.matchAll(IBAN)) {
    let candidate = m[0];
    for (;;) {
      const e = electronicFormatIBAN(candidate);
      if (e && isValidIBAN(e)) {
        out.push({ start: m.index, end: m.index + candidate.length, canonical: e });
        break;
      }
      const cut = candidate.lastIndexOf(' ');
      if (cut < 8) break;
      candidate = candidate.slice(0, cut);
    }
  }
  return out;
}

// A run of digits with the punctuation phone numbers are written with: the phone parser (most of redaction's cost)
// reads only these, not the whole text.
const PHONE_CANDIDATE = /[+(]?\d[\d ()./-]{5,24}\d/g;

function phones(text: string): Found[] {
  const { findPhoneNumbersInText } = loaded();
  const out: Found[] = [];
  for (const m of text.matchAll(PHONE_CANDIDATE)) {
    for (const f of findPhoneNumbersInText(m[0], { defaultCountry: 'US' })) {
      if (f.number.isPossible()) out.push({ start: m.index + f.startsAt, end: m.index + f.endsAt, canonical: f.number.number });
    }
  }
  return out;
}

/** The validators two detectors use, from ibantools and libphonenumber-js. */
interface PiiParsers {
  electronicFormatIBAN: typeof import('ibantools').electronicFormatIBAN;
  isValidIBAN: typeof import('ibantools').isValidIBAN;
  findPhoneNumbersInText: typeof import('libphonenumber-js').findPhoneNumbersInText;
}
let parsers: PiiParsers | null = null;
const loadParsers = onceAsync(async () => {
  const [iban, phone] = await Promise.all([import('ibantools'), import('libphonenumber-js')]);
  phone.findPhoneNumbersInText('+1 415 555 2671', { defaultCountry: 'US' });
  parsers = { electronicFormatIBAN: iban.electronicFormatIBAN, isValidIBAN: iban.isValidIBAN, findPhoneNumbersInText: phone.findPhoneNumbersInText };
});

/**
 * Loads the parsers, once per process: with the first request that redacts, so that a gateway whose projects never
 * redact does not hold them (about 3 MB of heap). The phone parser compiles its metadata on first use (tens of ms, more
 * on a loaded machine): done here too, before any redaction's deadline starts. Null when they are loaded already.
 */
export function loadPiiParsers(): Promise<void> | null {
  return parsers ? null : loadParsers();
}

function loaded(): PiiParsers {
  if (!parsers) throw new Error('PII parsers used before loadPiiParsers() resolved');
  return parsers;
}

const DETECTORS: Record<PiiKind, (text: string) => Found[]> = {
  email: (t) => matches(t, EMAIL, (m) => m.toLowerCase()),
  iban: ibans,
  card: (t) => [...matches(t, CARD, cardNumber), ...matches(t, CARD_DOTTED, cardNumber)],
  ssn: (t) => matches(t, SSN, (m) => m),
  ip: (t) => [
    ...matches(t, IPV4, (m) => (isIP(m) === 4 ? m : null)),
    ...matches(t, IPV6, (m) => (/[0-9a-f]/i.test(m) && isIP(m) === 6 ? m.toLowerCase() : null)),
  ],
  phone: phones,
};

export type PiiCounts = Partial<Record<PiiKind, number>>;

/** What a value already found is masked with for the detectors that follow: matched by none of them. */
const MASK = '\u0000';
/** A JSON string literal or number (in JSON already known to be valid). */
const JSON_TOKEN = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

/**
 * The text the detectors read, and where each of its UTF-16 units comes from in the given text. Normalised, per code
 * point: invisible characters (format characters and other default-ignorable code points: zero-width spaces and
 * joiners, soft hyphens, bidirectional marks, BOM) removed; every other space separator (no-break, thin,
 * ideographic, …) a space, line and paragraph separators a newline, dashes (en, em, minus, …) a hyphen-minus;
 * anything else NFKC (full-width digits and @, ligatures, …), and the decimal digits of other scripts ASCII digits.
 * ASCII text is its own normalisation.
 */
export interface Normalised {
  text: string;
  /** The span of the given text that the normalised text's unit `i` comes from. */
  origin(i: number): { start: number; end: number };
}

/** A code point (or several) replaced: at `n` in the normalised text, `nl` units long, from `ol` units at `o`. */
interface Edit {
  n: number;
  nl: number;
  o: number;
  ol: number;
}

const NON_ASCII = /[^\x00-\x7f]/;
const NON_ASCII_RUN = /[^\x00-\x7f]+/g;
const SPECIAL = /[\p{Cf}\p{Default_Ignorable_Code_Point}\p{Zs}\u2028\u2029\p{Pd}\u2212\p{Nd}]/u;
const INVISIBLE = /^[\p{Cf}\p{Default_Ignorable_Code_Point}]$/u;
const SPACE = /^\p{Zs}$/u;
const DASH = /^[\p{Pd}\u2212]$/u;
const DIGIT = /^\p{Nd}$/u;

/** Code points seen, normalised (bounded: a text of many distinct code points is normalised without it). */
const normalisedChars = new Map<string, string>();

function normaliseChar(ch: string): string {
  let out = normalisedChars.get(ch);
  if (out !== undefined) return out;
  if (INVISIBLE.test(ch)) out = '';
  else if (SPACE.test(ch)) out = ' ';
  else if (ch === '\u2028' || ch === '\u2029') out = '\n';
  else if (DASH.test(ch)) out = '-';
  else out = asciiDigit(ch.normalize('NFKC'));
  if (normalisedChars.size < 4096) normalisedChars.set(ch, out);
  return out;
}

/**
 * A decimal digit of another script (Arabic-Indic ٤, Devanagari ४, …: NFKC leaves them) as its ASCII digit. Unicode
 * encodes each script's digits as ten consecutive code points from 0: the value is the distance from the first one.
 */
function asciiDigit(ch: string): string {
  if (ch.length > 2 || !DIGIT.test(ch)) return ch;
  const cp = ch.codePointAt(0)!;
  let zero = cp;
  while (cp - zero < 9 && DIGIT.test(String.fromCodePoint(zero - 1))) zero--;
  return String(cp - zero);
}

const identity = (i: number) => ({ start: i, end: i + 1 });

export function normalise(text: string): Normalised {
  if (!NON_ASCII.test(text)) return { text, origin: identity };
  const parts: string[] = [];
  const edits: Edit[] = [];
  let at = 0; // in the given text: what is before it is in parts
  let n = 0; // the length of parts
  for (const m of text.matchAll(NON_ASCII_RUN)) {
    const run = m[0];
    // Most non-ASCII text (accented letters, CJK) is its own normalisation: one look at the whole run.
    if (!SPECIAL.test(run) && run.normalize('NFKC') === run) continue;
    let offset = m.index;
    for (const ch of run) {
      const out = normaliseChar(ch);
      if (out !== ch) {
        parts.push(text.slice(at, offset), out);
        n += offset - at;
        edits.push({ n, nl: out.length, o: offset, ol: ch.length });
        n += out.length;
        at = offset + ch.length;
      }
      offset += ch.length;
    }
  }
  if (edits.length === 0) return { text, origin: identity };
  parts.push(text.slice(at));
  return {
    text: parts.join(''),
    origin: (i) => {
      // The last edit at or before i.
      let lo = 0;
      let hi = edits.length - 1;
      let found = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (edits[mid]!.n <= i) {
          found = mid;
          lo = mid + 1;
        } else hi = mid - 1;
      }
      if (found < 0) return identity(i);
      const e = edits[found]!;
      if (i < e.n + e.nl) return { start: e.o, end: e.o + e.ol };
      const start = i - (e.n + e.nl) + e.o + e.ol;
      return { start, end: start + 1 };
    },
  };
}

/** How long redaction may take, and the clock it is measured on (tests inject one; never a sleep). */
export interface PiiDeadline {
  timeoutMs: number;
  now: () => number;
}

/**
 * One request's redaction (CONTRACT §11): every value found becomes a typed placeholder, the same value (in any
 * spelling: `+1 415 555 2671` and `(415) 555-2671`) the same placeholder within the request. Keeps the originals in
 * memory only, for restore().
 */
export class PiiRedaction {
  /** Placeholder → the original text (first spelling seen). */
  readonly originals = new Map<string, string>();
  readonly counts: PiiCounts = {};
  private readonly byValue = new Map<string, string>();
  private readonly next: Partial<Record<PiiKind, number>> = {};
  private readonly startedAt: number;

  constructor(private readonly deadline: PiiDeadline) {
    this.startedAt = deadline.now();
  }

  private checkDeadline(): void {
    if (this.deadline.now() - this.startedAt > this.deadline.timeoutMs) {
      throw new SvcError('pii_redaction_failed', {
        message: `PII redaction did not finish within ${this.deadline.timeoutMs} ms; the provider was not called.`,
      });
    }
  }

  private placeholder(kind: PiiKind, canonical: string, original: string): string {
    const key = `${kind}\u0000${canonical}`;
    let p = this.byValue.get(key);
    if (!p) {
      const n = (this.next[kind] = (this.next[kind] ?? 0) + 1);
      p = `[${LABEL[kind]}_${n}]`;
      this.byValue.set(key, p);
      this.originals.set(p, original);
    }
    this.counts[kind] = (this.counts[kind] ?? 0) + 1;
    return p;
  }

  /**
   * The text with every value found replaced; throws pii_redaction_failed past the deadline. The detectors read the
   * normalised text (normalise()); each placeholder replaces the value's span of the text as given, and keeps that
   * span as the original, so that restore() gives back exactly what the caller sent.
   */
  redact(text: string): string {
    this.checkDeadline();
    const n = normalise(text);
    let work = n.text;
    const spans: { start: number; end: number; placeholder: string }[] = [];
    for (const kind of PII_KINDS) {
      this.checkDeadline();
      const found = DETECTORS[kind](work);
      if (found.length === 0) continue;
      // The longest first among those starting at the same place (an IPv6 address before the IPv4 inside it).
      found.sort((a, b) => a.start - b.start || b.end - a.end);
      let masked = '';
      let at = 0;
      for (const f of found) {
        if (f.start < at) continue; // overlaps one already taken
        const start = n.origin(f.start).start;
        const end = n.origin(f.end - 1).end;
        spans.push({ start, end, placeholder: this.placeholder(kind, f.canonical, text.slice(start, end)) });
        // Masked, not replaced, for the detectors that follow: the offsets stay those of the normalised text.
        masked += work.slice(at, f.start) + MASK.repeat(f.end - f.start);
        at = f.end;
      }
      work = masked + work.slice(at);
    }
    this.checkDeadline();
    if (spans.length === 0) return text;
    spans.sort((a, b) => a.start - b.start);
    let out = '';
    let at = 0;
    for (const span of spans) {
      if (span.start < at) continue; // one character normalised into two, each part in another value
      out += text.slice(at, span.start) + span.placeholder;
      at = span.end;
    }
    return out + text.slice(at);
  }

  /**
   * Tool-call arguments (JSON text): each string (and number) of the JSON redacted as a text of its own, so that the
   * JSON stays valid and its escapes are read as what they stand for; a number that holds a value becomes the
   * placeholder as a string. Arguments that are not JSON are redacted as text.
   */
  redactJson(text: string): string {
    try {
      JSON.parse(text);
    } catch {
      return this.redact(text);
    }
    const tokens = [...text.matchAll(JSON_TOKEN)];
    const values = tokens.map((m) => (m[0].charCodeAt(0) === 34 ? (JSON.parse(m[0]) as string) : m[0]));
    // One pass over all of them, MASK between: no detector reads across it (a separate text each, at the cost of one).
    const joined = values.join(MASK);
    const redacted = values.some((v) => v.includes(MASK)) ? values.map((v) => this.redact(v)) : this.redact(joined).split(MASK);
    let out = '';
    let at = 0;
    tokens.forEach((m, i) => {
      if (redacted[i] === values[i]) return;
      out += text.slice(at, m.index) + JSON.stringify(redacted[i]);
      at = m.index + m[0].length;
    });
    return at === 0 ? text : out + text.slice(at);
  }

  get total(): number {
    return Object.values(this.counts).reduce((a, b) => a + (b ?? 0), 0);
  }

  /** The answer with the request's placeholders turned back into the originals (others stay as they are). */
  restore(text: string): string {
    if (this.originals.size === 0 || !text.includes('[')) return text;
    return text.replace(PLACEHOLDER, (p) => this.originals.get(p) ?? p);
  }

  /** Inside a JSON string (tool-call arguments): the originals escaped as JSON string content. */
  restoreInJson(text: string): string {
    if (this.originals.size === 0 || !text.includes('[')) return text;
    return text.replace(PLACEHOLDER, (p) => {
      const original = this.originals.get(p);
      return original === undefined ? p : JSON.stringify(original).slice(1, -1);
    });
  }

  /** A restorer for a streamed answer (json: a tool call's arguments, restored as JSON string content): see StreamRestorer. */
  streamRestorer(json = false): StreamRestorer {
    return new StreamRestorer(this, json);
  }
}

const PLACEHOLDER = /\[(?:EMAIL|PHONE|CARD|IBAN|SSN|IP)_\d+\]/g;
/** What the end of a chunk may hold of a placeholder still to be completed by the next one. */
const PARTIAL = /\[(?:[A-Z]{0,5}(?:_\d{0,6})?)?$/;

/**
 * Restores placeholders across chunk boundaries: a chunk ending in `[EMA` holds that part back until the next chunk
 * says whether it is `[EMAIL_1]`; flush() gives back whatever is still held at the end of the stream.
 */
export class StreamRestorer {
  private held = '';

  constructor(
    private readonly redaction: PiiRedaction,
    private readonly json = false,
  ) {}

  private restore(text: string): string {
    return this.json ? this.redaction.restoreInJson(text) : this.redaction.restore(text);
  }

  push(chunk: string): string {
    const text = this.held + chunk;
    const partial = PARTIAL.exec(text);
    const cut = partial ? partial.index : text.length;
    this.held = text.slice(cut);
    return this.restore(text.slice(0, cut));
  }

  flush(): string {
    const rest = this.held;
    this.held = '';
    return this.restore(rest);
  }
}
