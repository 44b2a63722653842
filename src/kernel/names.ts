import { invalid } from '../errors/svc-error.ts';

/**
 * Names of people and keys, compared the way a person reads them. One rule for key names (domain/keys/service.ts) and
 * for the people of a risk case (assignee and reviewer, CONTRACT §16): NFC, surrounding white space dropped,
 * invisible and direction-changing characters refused, letters of lookalike scripts not mixed; two names are the same
 * when their folds (NFKC, case-folded) are equal.
 */

/** White space around a name is dropped (Unicode White_Space; U+FEFF is not white space and is refused below). */
const SURROUNDING_SPACE = /^\p{White_Space}+|\p{White_Space}+$/gu;

/**
 * Characters a name may not hold anywhere: controls (Cc), format characters (Cf: zero-width U+200B-U+200D, U+2060,
 * U+FEFF, the bidi marks, embeddings, overrides and isolates U+200E/U+200F, U+202A-U+202E, U+2066-U+2069, U+061C,
 * the soft hyphen …), lone surrogates (Cs), line and paragraph separators (Zl, Zp) and the Hangul fillers, which
 * render as nothing. Each can make two different names look the same, or a name look like another.
 */
const FORBIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u115F\u1160\u3164\uFFA0]/u;
const FORBIDDEN_ALL = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u115F\u1160\u3164\uFFA0]/gu;

/** Scripts whose letters are confused with one another (a, а, α): a name may use letters of one of them only. */
const LOOKALIKE_SCRIPTS = [
  ['Latin', /\p{Script=Latin}/u],
  ['Cyrillic', /\p{Script=Cyrillic}/u],
  ['Greek', /\p{Script=Greek}/u],
] as const;

const hex = (cp: number): string => `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;

/**
 * A name as stored and returned: NFC, without surrounding white space, 1 to `maxChars` code points. Refuses (400
 * invalid_request naming `param`) invisible and direction-changing characters and names that mix Latin, Cyrillic and
 * Greek letters (UTS #39's single-script rule for the scripts with lookalikes).
 */
export function normalizeName(raw: unknown, param: string, maxChars: number): string {
  const size = `${param} must be a non-empty string of at most ${maxChars} characters`;
  if (typeof raw !== 'string') throw invalid(param, `${size}.`);
  const name = raw.normalize('NFC').replace(SURROUNDING_SPACE, '');
  // Characters are code points: 100 emoji are 100 characters, not 200 UTF-16 units.
  const chars = [...name];
  if (chars.length === 0 || chars.length > maxChars) {
    throw invalid(param, `${size} (surrounding white space is not counted).`);
  }
  const bad = chars.find((c) => FORBIDDEN.test(c));
  if (bad !== undefined) {
    throw invalid(param, `${param} must not contain control, invisible or text-direction characters (found ${hex(bad.codePointAt(0)!)}).`);
  }
  // Compatibility forms count too: fullwidth and mathematical letters are checked as the letters they stand for.
  const compat = name.normalize('NFKC');
  const scripts = LOOKALIKE_SCRIPTS.filter(([, re]) => re.test(compat)).map(([script]) => script);
  if (scripts.length > 1) {
    throw invalid(param, `${param} must not mix ${scripts.join(' and ')} letters (they have lookalikes of one another).`);
  }
  return name;
}

/**
 * The form two names are compared in: compatibility-normalized and case-folded (NFKC, upper then lower case, so
 * "ADMIN", "Admin", "ａｄｍｉｎ" and "admın" with a dotless i all equal "admin"; ß equals ss).
 */
export function nameFold(name: string): string {
  return name.normalize('NFKC').toUpperCase().toLowerCase().normalize('NFKC');
}

/**
 * The fold of a name that may predate these rules (a stored value never checked): the characters normalizeName
 * refuses are dropped and surrounding white space trimmed first, so "alice\u200b" stored long ago still equals "alice".
 */
export function storedNameFold(name: string): string {
  return nameFold(name.normalize('NFC').replace(FORBIDDEN_ALL, '').replace(SURROUNDING_SPACE, ''));
}
