import type { TLocalizedValidationError } from 'typebox/error';

/**
 * What a refusal says after the field's name, kept on the schema node it explains so that a rule and its wording are
 * written once: one sentence, or one per keyword that can fail (`{ type: …, minimum: … }`). `{value}` stands for the
 * value found; `{minimum}` and the like for that node's own keywords.
 */
export type Problem = string | Readonly<Record<string, string>>;
export const says = (problem: Problem) => ({ 'x-problem': problem });

/** A value as a refusal shows it: strings in quotes. */
export const show = (v: unknown): string => (typeof v === 'string' ? `"${v}"` : (JSON.stringify(v) ?? String(v)));

/** JSON pointer (RFC 6901) segments. */
export const pointer = (p: string): string[] =>
  p === '' ? [] : p.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));

/** The node `segments` lead to in a document or a schema, if any. */
export const valueAt = (root: unknown, segments: string[]): any => segments.reduce<any>((node, s) => node?.[s], root);

/**
 * The wording of one schema error (`{value}` left to fill): the deepest node along `schemaPath` (segments of the
 * error's schemaPath, from `root`) that has one for the error's keyword, so that a union's branches use their union's;
 * else TypeBox's own message. The node's keywords are filled in (`{minimum}` -> 0).
 */
export function problemFor(root: unknown, schemaPath: string[], error: TLocalizedValidationError): string {
  let problem = `${error.message}, got {value}`;
  let from: Record<string, unknown> = {};
  for (let i = 0; i <= schemaPath.length; i++) {
    const node = valueAt(root, schemaPath.slice(0, i));
    const said: Problem | undefined = node?.['x-problem'];
    const wording = typeof said === 'string' ? said : said?.[error.keyword];
    if (wording !== undefined) [problem, from] = [wording, node];
  }
  return problem.replace(/\{(\w+)\}/g, (all, key: string) => (key !== 'value' && key in from ? String(from[key]) : all));
}
