import { invalid } from '../../errors/svc-error.ts';

export const MAX_KEY_NAME_CHARS = 100;

/** White space around a name is dropped (Unicode White_Space; U+FEFF is not white space and is refused below). */
const SURROUNDING_SPACE = /^\p{White_Space}+|\p{White_Space}+$/gu;

/**
 * Characters a name may not hold anywhere: controls (Cc), format characters (Cf: zero-width U+200B-U+200D, U+2060,
 * U+FEFF, the bidi marks, embeddings, overrides and isolates U+200E/U+200F, U+202A-U+202E, U+2066-U+2069, U+061C,
 * the soft hyphen …), lone surrogates (Cs), line and paragraph separators (Zl, Zp) and the Hangul fillers, which
 * render as nothing. Each can make two different names look the same, or a name look like another.
 */
const FORBIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u115F\u1160\u3164\uFFA0]/u;

/** Scripts whose letters are confused with one another (a, а, α): a name may use letters of one of them only. */
const LOOKALIKE_SCRIPTS = [
  ['Latin', /\p{Script=Latin}/u],
  ['Cyrillic', /\p{Script=Cyrillic}/u],
  ['Greek', /\p{Script=Greek}/u],
] as const;

const hex = (cp: number): string => `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;

/**
 * A key name as stored and returned: NFC, without surrounding white space, 1 to 100 code points. Refuses (400
 * invalid_request, param "name") invisible and direction-changing characters and names that mix Latin, Cyrillic and
 * Greek letters (UTS #39's single-script rule for the scripts with lookalikes).
 */
export function normalizeKeyName(raw: unknown): string {
  if (typeof raw !== 'string') throw invalid('name', 'name must be a non-empty string of at most 100 characters.');
  const name = raw.normalize('NFC').replace(SURROUNDING_SPACE, '');
  // Characters are code points: 100 emoji are 100 characters, not 200 UTF-16 units.
  const chars = [...name];
  if (chars.length === 0 || chars.length > MAX_KEY_NAME_CHARS) {
    throw invalid('name', 'name must be a non-empty string of at most 100 characters (surrounding white space is not counted).');
  }
  const bad = chars.find((c) => FORBIDDEN.test(c));
  if (bad !== undefined) {
    throw invalid('name', `name must not contain control, invisible or text-direction characters (found ${hex(bad.codePointAt(0)!)}).`);
  }
  // Compatibility forms count too: fullwidth and mathematical letters are checked as the letters they stand for.
  const compat = name.normalize('NFKC');
  const scripts = LOOKALIKE_SCRIPTS.filter(([, re]) => re.test(compat)).map(([script]) => script);
  if (scripts.length > 1) {
    throw invalid('name', `name must not mix ${scripts.join(' and ')} letters (they have lookalikes of one another).`);
  }
  return name;
}

/**
 * The form two names are compared in for uniqueness: compatibility-normalized and case-folded (NFKC, upper then
 * lower case, so "ADMIN", "Admin", "ａｄｍｉｎ" and "admın" with a dotless i all equal "admin"; ß equals ss). Stored in
 * api_keys.active_name, whose unique index makes the database enforce it.
 */
export function keyNameFold(name: string): string {
  return name.normalize('NFKC').toUpperCase().toLowerCase().normalize('NFKC');
}
