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
// Country code, check digits, then groups of up to four (printed with spaces or not); validated by ibantools.
const IBAN = /\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b/g;
const CARD = /\b\d(?:[ -]?\d){12,18}\b/g;
// The SSA's rules: no 000, 666 or 9xx area, no 00 group, no 0000 serial.
const SSN = /\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b/g;
// Not inside a longer dotted number (a version 1.2.3.4.5), but a sentence's full stop may follow.
const IPV4 = /(?<!\d|\d\.)(?:\d{1,3}\.){3}\d{1,3}(?!\d|\.\d)/g;
const IPV6 = /(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])/g;

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
  card: (t) =>
    matches(t, CARD, (m) => {
      const digits = m.replace(/[ -]/g, '');
      return digits.length >= 13 && digits.length <= 19 && luhn(digits) ? digits : null;
    }),
  ssn: (t) => matches(t, SSN, (m) => m),
  ip: (t) => [
    ...matches(t, IPV4, (m) => (isIP(m) === 4 ? m : null)),
    ...matches(t, IPV6, (m) => (/[0-9a-f]/i.test(m) && isIP(m) === 6 ? m.toLowerCase() : null)),
  ],
  phone: phones,
};

export type PiiCounts = Partial<Record<PiiKind, number>>;

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

  /** The text with every value found replaced; throws pii_redaction_failed past the deadline. */
  redact(text: string): string {
    let out = text;
    for (const kind of PII_KINDS) {
      this.checkDeadline();
      const found = DETECTORS[kind](out);
      if (found.length === 0) continue;
      found.sort((a, b) => a.start - b.start);
      let result = '';
      let at = 0;
      for (const f of found) {
        if (f.start < at) continue; // overlaps one already replaced (IPv4 inside an IPv6, say)
        result += out.slice(at, f.start) + this.placeholder(kind, f.canonical, out.slice(f.start, f.end));
        at = f.end;
      }
      out = result + out.slice(at);
    }
    this.checkDeadline();
    return out;
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

  /** A restorer for a streamed answer: see StreamRestorer. */
  streamRestorer(): StreamRestorer {
    return new StreamRestorer(this);
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

  constructor(private readonly redaction: PiiRedaction) {}

  push(chunk: string): string {
    const text = this.held + chunk;
    const partial = PARTIAL.exec(text);
    const cut = partial ? partial.index : text.length;
    this.held = text.slice(cut);
    return this.redaction.restore(text.slice(0, cut));
  }

  flush(): string {
    const rest = this.held;
    this.held = '';
    return this.redaction.restore(rest);
  }
}
