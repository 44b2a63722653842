import { nameFold, normalizeName } from '../../kernel/names.ts';

export const MAX_KEY_NAME_CHARS = 100;

/**
 * A key name as stored and returned: NFC, without surrounding white space, 1 to 100 code points. Refuses (400
 * invalid_request, param "name") invisible and direction-changing characters and names that mix Latin, Cyrillic and
 * Greek letters (the one rule for names: kernel/names.ts, shared with the people of a risk case).
 */
export function normalizeKeyName(raw: unknown): string {
  return normalizeName(raw, 'name', MAX_KEY_NAME_CHARS);
}

/**
 * The form two names are compared in for uniqueness (kernel/names.ts nameFold: NFKC, case-folded). Stored in
 * api_keys.active_name, whose unique index makes the database enforce it.
 */
export function keyNameFold(name: string): string {
  return nameFold(name);
}
