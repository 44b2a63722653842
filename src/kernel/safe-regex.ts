import { RE2JS } from 're2js';

/**
 * Caller-supplied regular expressions (eval `regex` assertions, JSON Schema `pattern` / `patternProperties`) run on
 * RE2 (the pure-JS port re2js): matching takes time linear in the input, so no pattern backtracks for seconds the way
 * `(a|a)*b` or `^(a+)+$` do on JavaScript's RegExp.
 *
 * A pattern is read as ECMA-262 with the `u` flag (what JSON Schema says of `pattern`), then run by RE2:
 * - refused (UnsafePattern): what RE2 cannot run in linear time — backreferences (`\1`, `\k<name>`), lookahead and
 *   lookbehind (`(?=`, `(?!`, `(?<=`, `(?<!`) — and repetition counts over 1000 (`a{1001}`, or nested counts whose
 *   product exceeds 1000), and a pattern that compiles to more than MAX_PATTERN_PROGRAM RE2 instructions;
 * - kept as in JavaScript: `.` (any character but \n, \r, \u2028, \u2029), `\s` / `\S` (JavaScript's Unicode white
 *   space), `\d`, `\w`, `\b` (ASCII), `\uXXXX`, `\u{…}`, `\p{L}`-style general categories, named groups `(?<n>…)`;
 * - different from JavaScript: inside a character class `\S` is RE2's ASCII non-space; `\p{Script=…}` is refused
 *   (write `\p{Greek}`); RE2 also accepts its own syntax (`(?i)`, `\Q…\E`, `[[:alpha:]]`, `\z`).
 *
 * The cost of one test is bounded too: RE2 may fall back to a simulation that costs per character in proportion to the
 * program size, so a test of a string costs (length + 1) × (program size + 200) "units" and a caller may give a budget
 * for a whole validation (withPatternBudget); past it, PatternBudgetExceeded is thrown (~250 ms of work at most).
 */

/** RE2 instructions a pattern may compile to. */
export const MAX_PATTERN_PROGRAM = 1_000;
/** The work units one test (or one budgeted validation) may take: (chars + 1) × (program size + 200). */
export const PATTERN_WORK_BUDGET = 25_000_000;
const PER_CHAR_BASE = 200;

/** The pattern is not a regular expression (`syntax`) or RE2 cannot run it safely (`unsupported`): the message says why. */
export class UnsafePattern extends Error {
  constructor(
    message: string,
    readonly kind: 'syntax' | 'unsupported' = 'unsupported',
  ) {
    super(message);
  }
}

/** A test went over the work budget (a long string tested against a large pattern). */
export class PatternBudgetExceeded extends Error {}

// ECMA-262 white space and line terminators (what `\s` matches in JavaScript), as RE2 class items.
const JS_SPACE = '\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}';
const JS_DOT = '[^\\n\\r\\x{2028}\\x{2029}]';

/**
 * `.`, `\s` and `\S` rewritten to their JavaScript meaning (RE2's `.` also matches \r, its `\s` is ASCII only);
 * backreferences refused (re2js's translation would turn `\k<n>` into the text "k<n>" rather than fail).
 */
function toRe2Syntax(pattern: string): string {
  let out = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '\\') {
      const n = pattern[i + 1] ?? '';
      i++;
      if (n === 'k' || (!inClass && n >= '1' && n <= '9')) {
        throw new UnsafePattern('backreferences (\\1, \\k<name>) are not supported');
      }
      if (n === 's') out += inClass ? JS_SPACE : `[${JS_SPACE}]`;
      else if (n === 'S' && !inClass) out += `[^${JS_SPACE}]`;
      else out += c + n;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      out += c;
    } else if (c === '[') {
      inClass = true;
      out += c;
      if (pattern[i + 1] === '^') out += pattern[++i];
    } else if (c === '.') {
      out += JS_DOT;
    } else {
      out += c;
    }
  }
  return out;
}

const reason = (err: unknown): string => {
  const m = (err as Error).message.replace(/^error parsing regexp: /, '');
  if (/\(\?[=!]|\(\?<[=!]/.test(m)) return 'lookahead and lookbehind ((?=, (?!, (?<=, (?<!) are not supported';
  return m;
};

/** A compiled caller pattern: `test` as RegExp's (a match anywhere), in linear time. */
export class SafeRegExp {
  private readonly re: RE2JS;
  private readonly size: number;

  constructor(readonly source: string) {
    try {
      new RegExp(source, 'u');
    } catch (err) {
      throw new UnsafePattern(`not a valid regular expression: ${(err as Error).message}`, 'syntax');
    }
    const re2 = toRe2Syntax(source);
    try {
      this.re = RE2JS.compile(RE2JS.translateRegExp(re2));
    } catch (err) {
      throw new UnsafePattern(reason(err));
    }
    this.size = this.re.programSize();
    if (this.size > MAX_PATTERN_PROGRAM) {
      throw new UnsafePattern(`it compiles to ${this.size} RE2 instructions, more than ${MAX_PATTERN_PROGRAM} (large repetition counts)`);
    }
  }

  test(input: string): boolean {
    spend((input.length + 1) * (this.size + PER_CHAR_BASE));
    return this.re.test(input);
  }

  /** ajv keys its compiled patterns by this. */
  toString(): string {
    return `/${this.source}/u`;
  }
}

let budget: { left: number } | null = null;

function spend(units: number): void {
  const b = budget ?? { left: PATTERN_WORK_BUDGET };
  b.left -= units;
  if (b.left < 0) throw new PatternBudgetExceeded(`testing the patterns would take more than ${PATTERN_WORK_BUDGET} work units`);
}

/** Runs `fn` (synchronous: an ajv validation) with one shared budget for every pattern test inside it. */
export function withPatternBudget<T>(fn: () => T, units = PATTERN_WORK_BUDGET): T {
  const outer = budget;
  budget = { left: units };
  try {
    return fn();
  } finally {
    budget = outer;
  }
}

/** ajv's `code: { regExp }` option: every `pattern` and `patternProperties` of a schema compiles through this. */
export const ajvRegExp = Object.assign((pattern: string, _flags: string) => new SafeRegExp(pattern), { code: 'safeRegExp' });
